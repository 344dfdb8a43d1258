//! # dnsluice-options
//!
//! A module's options are declared once, as one struct:
//!
//! ```
//! use dnsluice_options::{Choice, Options};
//! use std::time::Duration;
//!
//! /// How the queries travel.
//! #[derive(Choice, Clone, Copy, Debug, PartialEq)]
//! enum Transport {
//!     /// Plain DNS over UDP.
//!     Udp,
//!     /// Plain DNS over TCP.
//!     Tcp,
//! }
//!
//! #[derive(Options, Debug)]
//! struct ClientOptions {
//!     /// The server, as `IP:PORT`.
//!     server: String,
//!     /// How the queries travel.
//!     #[option(default = Transport::Udp)]
//!     transport: Transport,
//!     /// How long to wait for an answer.
//!     #[option(default = Duration::from_secs(2))]
//!     timeout: Duration,
//!     /// Queries outstanding at most.
//!     #[option(default = 100, range = 1..=100_000)]
//!     inflight: u32,
//! }
//!
//! let table: toml::Table = toml::from_str("server = \"127.0.0.1:53\"\ntimeout = \"500ms\"").unwrap();
//! let options = ClientOptions::from_table(table).unwrap();
//! assert_eq!(options.timeout, Duration::from_millis(500));
//! assert_eq!(options.transport, Transport::Udp);
//!
//! let docs = ClientOptions::docs();
//! assert_eq!(docs[1].key, "transport");
//! assert_eq!(docs[1].help, "How the queries travel.");
//! assert_eq!(docs[1].default.text(), "\"udp\"");
//! ```
//!
//! From that one declaration come the parser (every key typed, unknown keys
//! an error naming the key, ranges checked), the documentation
//! ([`Options::docs`]: key, type, default, the doc comment) that `dnsluice
//! modules` and `docs/modules.md` print, and — through the docs — the
//! command-line flags of the shortcut commands (`--timeout 500ms` for the key
//! `timeout`). Shared groups (TLS, timeouts) are structs of their own,
//! embedded with `#[option(flatten)]`: their keys sit beside the others.
//!
//! Why our own derive: serde's `flatten` does not combine with
//! `deny_unknown_fields`, and the documentation (types, defaults, doc
//! comments) has to come from the same declaration as the parser. A schema
//! crate (schemars) gives the docs but as JSON Schema, which the CLI would
//! then have to read back; `serde_ignored` gives unknown keys but no docs.
//! The derive here is small: it takes keys out of a table one by one, so
//! whatever is left over is unknown.
//!
//! Field attributes (`#[option(...)]`):
//! - `default = EXPR`: the value when the key is absent (`default` alone:
//!   `Default::default()`); without it the key is required, except for an
//!   `Option<T>` field, which is `None` when absent.
//! - `rename = "key"`: the key when it differs from the field name.
//! - `range = LOW..=HIGH`: accepted values (numbers and durations).
//! - `flag_alias = "name"`: another name of its command-line flag (the
//!   name another tool gives the same thing; TOML takes the key only).
//! - `flatten`: the field is a group (a struct deriving [`Options`]) whose
//!   keys sit beside this struct's.
//!
//! On the struct, `#[options(hint(key = "message"))]` says what to answer
//! when `key` is given although the struct does not take it (a key that
//! belongs to a related module).

#![warn(missing_docs)]

mod doc;
mod error;
mod table;
mod value;

pub use dnsluice_options_derive::{Choice, Options};
pub use doc::{ChoiceDoc, DefaultDoc, OptionDoc, Shape};
pub use error::OptionError;
pub use table::OptionTable;
/// The TOML crate the tables come from (the derive's code names it through here).
pub use toml;
pub use value::{check_range, ChoiceValue, OptionValue};

/// A struct of options: derive it with `#[derive(Options)]`.
pub trait Options: Sized {
    /// Appends the documentation of every key, in declaration order
    /// (a flattened group's keys where the group is).
    fn describe(docs: &mut Vec<OptionDoc>);

    /// Takes this struct's keys out of `table` (what is left is not ours).
    fn take_from(table: &mut OptionTable) -> Result<Self, OptionError>;

    /// What to say when `key`, which this struct does not take, is given
    /// (`#[options(hint(responses = "..."))]` on the struct); `None`: the
    /// usual "unknown option".
    fn hint(_key: &str) -> Option<&'static str> {
        None
    }

    /// The documentation of every key.
    fn docs() -> Vec<OptionDoc> {
        let mut docs = Vec::new();
        Self::describe(&mut docs);
        docs
    }

    /// Parses a whole table: a key this struct does not have is an error
    /// that names it (and the closest key it does have). Unknown keys are
    /// reported first: a misspelt key is the mistake, not the key it left out.
    fn from_table(table: toml::Table) -> Result<Self, OptionError> {
        let table = OptionTable::new(table);
        table.check_known(&Self::docs(), Self::hint)?;
        Self::take_from(&mut { table })
    }
}

/// No options at all.
impl Options for () {
    fn describe(_: &mut Vec<OptionDoc>) {}
    fn take_from(_: &mut OptionTable) -> Result<Self, OptionError> {
        Ok(())
    }
}

/// Implements [`OptionValue`] for a type written as one string, through its
/// `FromStr` (with `Err: Display`) and `Display`: `text_option!(LookupType, "record type")`.
#[macro_export]
macro_rules! text_option {
    ($type:ty, $what:expr) => {
        impl $crate::OptionValue for $type {
            fn shape() -> $crate::Shape {
                $crate::Shape::Text($what)
            }
            fn from_toml(
                value: $crate::toml::Value,
            ) -> ::std::result::Result<Self, ::std::string::String> {
                match value {
                    $crate::toml::Value::String(text) => {
                        text.parse::<$type>().map_err(|e| e.to_string())
                    }
                    other => Err(format!(
                        "expected a string ({}), found {}",
                        $what,
                        other.type_str()
                    )),
                }
            }
            fn to_toml(&self) -> ::std::option::Option<$crate::toml::Value> {
                Some($crate::toml::Value::String(self.to_string()))
            }
        }
    };
}
