//! The documentation of an option, as the derive writes it.

use std::fmt;

/// One key of a module's options.
#[derive(Clone, Debug, PartialEq)]
pub struct OptionDoc {
    /// The key in a stage's table (and, with `-` for `_`, the flag).
    pub key: &'static str,
    /// What values it takes.
    pub shape: Shape,
    /// Its default.
    pub default: DefaultDoc,
    /// The first paragraph of its doc comment, on one line.
    pub help: &'static str,
    /// The rest of its doc comment (may be empty).
    pub details: &'static str,
    /// The accepted range, as TOML values, when one is declared.
    pub range: Option<(toml::Value, toml::Value)>,
    /// Other names of its command-line flag (`#[option(flag_alias = "threads")]`):
    /// the name another tool gives the same thing.
    pub flag_aliases: &'static [&'static str],
}

impl OptionDoc {
    /// The command-line flag for this key: `--name-servers` for `name_servers`.
    pub fn flag(&self) -> String {
        format!("--{}", self.key.replace('_', "-"))
    }

    /// The accepted range as text (`1 to 100000`), or `""`.
    pub fn range_text(&self) -> String {
        match &self.range {
            Some((low, high)) => format!("{low} to {high}"),
            None => String::new(),
        }
    }
}

/// The default of an option.
#[derive(Clone, Debug, PartialEq)]
pub enum DefaultDoc {
    /// The key must be given.
    Required,
    /// Absent means "not set" (an `Option` field).
    Unset,
    /// This value.
    Value(toml::Value),
}

impl DefaultDoc {
    /// As shown in the docs: `required`, `unset`, or the value as TOML.
    pub fn text(&self) -> String {
        match self {
            DefaultDoc::Required => "required".into(),
            DefaultDoc::Unset => "unset".into(),
            DefaultDoc::Value(value) => value.to_string(),
        }
    }
}

/// One value a choice takes, with its doc comment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChoiceDoc {
    /// The value as written.
    pub name: &'static str,
    /// Its doc comment, on one line.
    pub help: &'static str,
}

/// What values an option takes.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// `true` or `false`.
    Bool,
    /// A whole number.
    Integer,
    /// A number.
    Float,
    /// Any string.
    String,
    /// A file path (relative paths in a pipeline file are relative to that file).
    Path,
    /// A duration with its unit: `"2s"`, `"500ms"`, `"1m30s"`.
    Duration,
    /// One of these strings.
    Choice(Vec<ChoiceDoc>),
    /// A list (a single value is a list of one).
    List(Box<Shape>),
    /// A string with a syntax of its own, named here (`record type`).
    Text(&'static str),
}

impl Shape {
    /// True for a path, or a list of paths.
    pub fn is_path(&self) -> bool {
        match self {
            Shape::Path => true,
            Shape::List(inner) => inner.is_path(),
            _ => false,
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Bool => f.write_str("bool"),
            Shape::Integer => f.write_str("integer"),
            Shape::Float => f.write_str("number"),
            Shape::String => f.write_str("string"),
            Shape::Path => f.write_str("path"),
            Shape::Duration => f.write_str("duration"),
            Shape::Choice(choices) => {
                let names: Vec<&str> = choices.iter().map(|c| c.name).collect();
                f.write_str(&names.join(" | "))
            }
            Shape::List(inner) => write!(f, "list of {inner}"),
            Shape::Text(what) => f.write_str(what),
        }
    }
}
