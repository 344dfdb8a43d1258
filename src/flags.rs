//! Command-line flags made from a module's declared options, so a shortcut
//! command (`lookup`, `replay`) takes the module's keys as flags without
//! declaring them again: the key `name_servers` is `--name-servers`, its
//! help is the doc comment, and the value is read by the same parser as in a
//! TOML pipeline (so the same errors and the same defaults).
//!
//! `#[command(flatten)] module: ModuleFlags<LookupOptions>` in a clap
//! `Args` struct adds every key of `LookupOptions` as a flag; the values
//! given (only those: defaults stay the module's) come back as a TOML table.
//! Booleans are `--key` (true), `--key=false` and `--no-key`; lists take
//! comma-separated values or the flag repeated; durations take a unit
//! (`--timeout 500ms`).

use clap::builder::{BoolishValueParser, PossibleValue};
use clap::{Arg, ArgAction, ArgMatches, Command, FromArgMatches};
use dnsluice_core::options::{DefaultDoc, OptionDoc, Options, Shape};
use std::marker::PhantomData;

/// The flags of options struct `O`, and the values given for them.
#[derive(Debug, Clone)]
pub struct ModuleFlags<O> {
    /// The values given on the command line, by key.
    pub table: toml::Table,
    options: PhantomData<fn() -> O>,
}

impl<O> Default for ModuleFlags<O> {
    fn default() -> Self {
        ModuleFlags {
            table: toml::Table::new(),
            options: PhantomData,
        }
    }
}

impl<O: Options> ModuleFlags<O> {
    /// The options: the given values over the module's defaults. An error
    /// names the flag (`--timeout: ...`).
    pub fn parse(&self) -> anyhow::Result<O> {
        parse_table::<O>(self.table.clone())
    }
}

/// Reads `table` (given on the command line) as `O`; errors name the flag.
pub fn parse_table<O: Options>(table: toml::Table) -> anyhow::Result<O> {
    O::from_table(table).map_err(|e| flag_error(e.key.as_deref(), e.message))
}

/// The flag of the option `key`: `name_servers` is `--name-servers`.
pub fn flag_name(key: &str) -> String {
    key.replace('_', "-")
}

/// An error of an option given as a flag, in the command line's words:
/// `--timeout: ...` (just the message when no key is at fault). Every
/// command reports option errors through this one function.
pub fn flag_error(key: Option<&str>, message: impl std::fmt::Display) -> anyhow::Error {
    match key {
        Some(key) => anyhow::anyhow!("--{}: {message}", flag_name(key)),
        None => anyhow::anyhow!("{message}"),
    }
}

/// An error of a pipeline a command made of its flags
/// ([`dnsluice_core::pipeline::Pipeline::from_stages`]): a configuration
/// error names the flag (see [`flag_error`]), not a stage's key; any other
/// error is left as it is.
pub fn in_flag_terms(e: anyhow::Error) -> anyhow::Error {
    match e.downcast::<dnsluice_core::pipeline::ConfigError>() {
        Ok(c) => flag_error(c.key.as_deref(), c.message),
        Err(e) => e,
    }
}

/// The flag's value name, from the option's shape.
fn value_name(shape: &Shape) -> &'static str {
    match shape {
        Shape::Bool => "BOOL",
        Shape::Integer => "N",
        Shape::Float => "X",
        Shape::Path => "FILE",
        Shape::Duration => "DURATION",
        Shape::List(inner) => value_name(inner),
        Shape::Choice(_) | Shape::String | Shape::Text(_) => "VALUE",
    }
}

/// The help line: the doc comment, the range and the default.
fn help_of(doc: &OptionDoc) -> String {
    let mut help = doc.help.to_string();
    let range = doc.range_text();
    if !range.is_empty() {
        help.push_str(&format!(" ({range})"));
    }
    match &doc.default {
        DefaultDoc::Value(value)
            if !matches!(doc.shape, Shape::Bool) || value.as_bool() == Some(true) =>
        {
            help.push_str(&format!(" [default: {}]", value_text(value)));
        }
        DefaultDoc::Required => help.push_str(" [required]"),
        _ => {}
    }
    help
}

/// A TOML value as a user would type it as a flag value.
fn value_text(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(items) => items.iter().map(value_text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn no_id(key: &str) -> String {
    format!("no-{key}")
}

/// Adds a flag for every key in `docs`.
pub fn add_flags(mut cmd: Command, docs: &[OptionDoc]) -> Command {
    for doc in docs {
        let long = flag_name(doc.key);
        let mut arg = Arg::new(doc.key)
            .long(long.clone())
            .help(help_of(doc))
            .value_name(value_name(&doc.shape))
            .visible_aliases(doc.flag_aliases.iter().copied());
        arg = match &doc.shape {
            Shape::Bool => arg
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .value_parser(BoolishValueParser::new())
                .overrides_with(no_id(doc.key)),
            Shape::Integer => arg.value_parser(clap::value_parser!(i64)),
            Shape::Float => arg.value_parser(clap::value_parser!(f64)),
            Shape::Choice(choices) => arg.value_parser(
                choices
                    .iter()
                    .map(|c| PossibleValue::new(c.name).help(c.help))
                    .collect::<Vec<_>>(),
            ),
            Shape::List(inner) => {
                let arg = arg.value_delimiter(',').action(ArgAction::Append);
                match **inner {
                    Shape::Integer => arg.value_parser(clap::value_parser!(i64)),
                    _ => arg,
                }
            }
            _ => arg,
        };
        cmd = cmd.arg(arg);
        if matches!(doc.shape, Shape::Bool) {
            cmd = cmd.arg(
                Arg::new(no_id(doc.key))
                    .long(format!("no-{long}"))
                    .action(ArgAction::SetTrue)
                    .help(format!("Same as --{long}=false"))
                    .hide_short_help(true)
                    .overrides_with(doc.key),
            );
        }
    }
    cmd
}

/// The values given in `matches` for the keys in `docs`, as TOML.
pub fn given_values(matches: &ArgMatches, docs: &[OptionDoc]) -> toml::Table {
    let mut table = toml::Table::new();
    for doc in docs {
        let value = match &doc.shape {
            Shape::Bool => {
                if matches.get_flag(&no_id(doc.key)) {
                    Some(toml::Value::Boolean(false))
                } else {
                    matches
                        .get_one::<bool>(doc.key)
                        .map(|b| toml::Value::Boolean(*b))
                }
            }
            Shape::Integer => matches
                .get_one::<i64>(doc.key)
                .map(|i| toml::Value::Integer(*i)),
            Shape::Float => matches
                .get_one::<f64>(doc.key)
                .map(|x| toml::Value::Float(*x)),
            Shape::List(inner) => match **inner {
                Shape::Integer => matches
                    .get_many::<i64>(doc.key)
                    .map(|v| toml::Value::Array(v.map(|i| toml::Value::Integer(*i)).collect())),
                _ => matches.get_many::<String>(doc.key).map(|v| {
                    toml::Value::Array(v.map(|s| toml::Value::String(s.clone())).collect())
                }),
            },
            _ => matches
                .get_one::<String>(doc.key)
                .map(|s| toml::Value::String(s.clone())),
        };
        if let Some(value) = value {
            table.insert(doc.key.to_string(), value);
        }
    }
    table
}

impl<O: Options> FromArgMatches for ModuleFlags<O> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(ModuleFlags {
            table: given_values(matches, &O::docs()),
            options: PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.table.extend(given_values(matches, &O::docs()));
        Ok(())
    }
}

impl<O: Options> clap::Args for ModuleFlags<O> {
    fn augment_args(cmd: Command) -> Command {
        add_flags(cmd, &O::docs())
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        add_flags(cmd, &O::docs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use dnsluice_resolver::dns::LookupOptions;
    use std::time::Duration;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        lookup: ModuleFlags<LookupOptions>,
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
    }

    #[test]
    fn only_given_values_reach_the_table() {
        let cli = parse(&[
            "--timeout",
            "750ms",
            "--name-servers",
            "127.0.0.1,127.0.0.2",
            "--threads",
            "8",
        ])
        .unwrap();
        let keys: Vec<&String> = cli.lookup.table.keys().collect();
        assert_eq!(keys, ["name_servers", "timeout", "workers"]);
        let options = cli.lookup.parse().unwrap();
        assert_eq!(options.client.timeout, Duration::from_millis(750));
        assert_eq!(options.name_servers, ["127.0.0.1", "127.0.0.2"]);
        assert_eq!(options.workers, Some(8));
        // Not given: the module's own default.
        assert_eq!(options.retries, 5);
    }

    #[test]
    fn booleans_take_three_spellings() {
        let off = |args: &[&str]| {
            parse(args)
                .unwrap()
                .lookup
                .parse()
                .unwrap()
                .client
                .tcp_fallback
        };
        assert!(off(&[]));
        assert!(!off(&["--no-tcp-fallback"]));
        assert!(!off(&["--tcp-fallback=false"]));
        assert!(off(&["--no-tcp-fallback", "--tcp-fallback"]));
    }

    #[test]
    fn errors_name_the_flag() {
        let e = parse(&["--timeout", "3000"])
            .unwrap()
            .lookup
            .parse()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--timeout: 3000 has no unit: write e.g. \"3000ms\" or \"3000s\""
        );
        let e = parse(&["--workers", "0"])
            .unwrap()
            .lookup
            .parse()
            .unwrap_err();
        assert_eq!(e.to_string(), "--workers: must be from 1 to 100000 (is 0)");
        assert!(parse(&["--transport", "carrier-pigeon"]).is_err());
        assert!(parse(&["--edns-udp-size", "x"]).is_err());
    }
}
