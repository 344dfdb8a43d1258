//! The module registry: dotted names → constructors.
//!
//! One registry serves TOML pipelines, the CLI (and later Lua): a module added
//! here with [`Registry::add`] is usable everywhere by its name. Constructors
//! receive their options as a TOML table and parse it into a typed struct with
//! [`StageOptions::parse`] (use `#[serde(deny_unknown_fields)]`).

use crate::{Producer, Receiver, StageError};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a module sits in a chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Produces objects from outside (a file, an interface).
    Input,
    /// Takes objects and passes (some of) them on.
    Filter,
    /// Takes objects and consumes them (prints, writes, sends).
    Output,
}

impl Role {
    /// `input`, `filter` or `output`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Input => "input",
            Role::Filter => "filter",
            Role::Output => "output",
        }
    }
}

/// Documentation of one option, shown by `dnsluice modules`.
#[derive(Clone, Copy, Debug)]
pub struct OptionDoc {
    /// Key in the stage's table.
    pub name: &'static str,
    /// Value type as written in TOML (`string`, `integer`, `bool`, ...).
    pub kind: &'static str,
    /// Default, as TOML text; `""` for a required option.
    pub default: &'static str,
    /// One line on what it does.
    pub help: &'static str,
}

/// A stage's options as given in the pipeline, not yet typed.
#[derive(Clone, Debug, Default)]
pub struct StageOptions {
    /// The module's dotted name, for error messages.
    pub module: String,
    /// The options (every key of the stage's table but `module`).
    pub table: toml::Table,
}

impl StageOptions {
    /// Options `table` for `module`.
    pub fn new(module: &str, table: toml::Table) -> Self {
        StageOptions {
            module: module.to_string(),
            table,
        }
    }

    /// Parses the options into `T`. On failure the error names the offending
    /// key when there is one ([`crate::error::ErrorKind::Option`]).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, StageError> {
        let value = toml::Value::Table(self.table.clone());
        serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let message = e.into_inner().to_string();
            // For an unknown key serde's path stops at the table; the key is in the message.
            let key = if path == "." || path.is_empty() {
                unknown_field_in(&message)
            } else {
                // `ports[0]` → `ports`: the key as written in the table.
                let key = path.split(['.', '[']).next().unwrap_or_default();
                Some(key.to_string())
            };
            StageError::option(&self.module, key.as_deref(), message)
        })
    }
}

/// `unknown field `x`, expected ...` → `x`.
fn unknown_field_in(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    Some(rest[..rest.find('`')?].to_string())
}

/// Builds an input stage from its options.
pub type InputFactory =
    Arc<dyn Fn(&StageOptions) -> Result<Box<dyn Producer>, StageError> + Send + Sync>;
/// Builds a filter stage that pushes to `downstream`.
pub type PushFilterFactory = Arc<
    dyn Fn(&StageOptions, Box<dyn Receiver>) -> Result<Box<dyn Receiver>, StageError> + Send + Sync,
>;
/// Builds a filter stage that pulls from `upstream`.
pub type PullFilterFactory = Arc<
    dyn Fn(&StageOptions, Box<dyn Producer>) -> Result<Box<dyn Producer>, StageError> + Send + Sync,
>;
/// Builds an output stage from its options.
pub type OutputFactory =
    Arc<dyn Fn(&StageOptions) -> Result<Box<dyn Receiver>, StageError> + Send + Sync>;

/// Builds, in the calling thread, everything after a split stage (its filters
/// and the output) for worker `index`; called once in each worker thread.
pub type DownstreamBuilder =
    Arc<dyn Fn(usize) -> Result<Box<dyn Receiver>, StageError> + Send + Sync>;
/// Builds a stage that hands objects to worker threads, each running its own
/// copy of the rest of the chain made with the [`DownstreamBuilder`] (see
/// `filter.split` and [`crate::pipeline`]).
pub type SplitFactory = Arc<
    dyn Fn(&StageOptions, DownstreamBuilder) -> Result<Box<dyn Receiver>, StageError> + Send + Sync,
>;

/// How to construct a module, by role.
#[derive(Clone)]
pub enum Factory {
    /// An input.
    Input(InputFactory),
    /// A filter, in its push and pull forms.
    Filter {
        /// Push form: holds its downstream.
        push: PushFilterFactory,
        /// Pull form: holds its upstream.
        pull: PullFilterFactory,
    },
    /// An output.
    Output(OutputFactory),
    /// A filter that runs the rest of the chain in worker threads (push only).
    Split(SplitFactory),
}

/// One registered module.
#[derive(Clone)]
pub struct ModuleEntry {
    /// Dotted name (`input.mmpcap`).
    pub name: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// Its options.
    pub options: &'static [OptionDoc],
    /// Its constructor(s).
    pub factory: Factory,
}

impl ModuleEntry {
    /// The module's role, from its factory.
    pub fn role(&self) -> Role {
        match self.factory {
            Factory::Input(_) => Role::Input,
            Factory::Filter { .. } | Factory::Split(_) => Role::Filter,
            Factory::Output(_) => Role::Output,
        }
    }
}

/// Dotted module names → entries.
#[derive(Clone, Default)]
pub struct Registry {
    modules: BTreeMap<&'static str, ModuleEntry>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or replaces) a module.
    pub fn add(&mut self, entry: ModuleEntry) -> &mut Self {
        self.modules.insert(entry.name, entry);
        self
    }

    /// The module named `name`.
    pub fn get(&self, name: &str) -> Option<&ModuleEntry> {
        self.modules.get(name)
    }

    /// Every module, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &ModuleEntry> {
        self.modules.values()
    }

    /// Every module name, sorted, comma-separated (for "unknown module" errors).
    pub fn names(&self) -> String {
        self.modules.keys().copied().collect::<Vec<_>>().join(", ")
    }
}
