//! How each type of value is read from TOML and written back (for defaults).

use crate::{OptionError, Shape};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;
use toml::Value;

/// A type an option can have.
pub trait OptionValue: Sized {
    /// What values it takes (for docs and command-line flags).
    fn shape() -> Shape;
    /// Reads it; the error says what was expected and what was found.
    fn from_toml(value: Value) -> Result<Self, String>;
    /// Writes it back (a default, shown in the docs); `None` for "not set".
    fn to_toml(&self) -> Option<Value>;
}

/// A choice among named values: derive it with `#[derive(Choice)]` on an enum
/// of unit variants. Names are the variants' in kebab case
/// (`RoundRobin` → `round-robin`) unless `#[choice(name = "...")]` says
/// otherwise; reading ignores ASCII case and also takes the aliases
/// (`#[choice(alias = "dot")]`).
pub trait ChoiceValue: Sized + Copy + 'static {
    /// Every value, in declaration order, with its name.
    const ALL: &'static [(Self, &'static str)];
    /// Other names accepted when reading (`#[choice(alias = "dot")]`), not documented.
    const ALIASES: &'static [(Self, &'static str)] = &[];
    /// The value's name.
    fn name(self) -> &'static str;
    /// The value named `text` (ASCII case ignored); the error lists the names.
    fn parse_name(text: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .chain(Self::ALIASES)
            .find(|(_, name)| name.eq_ignore_ascii_case(text))
            .map(|(value, _)| *value)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|(_, n)| *n).collect();
                format!("`{text}` is not one of {}", names.join(", "))
            })
    }
}

fn found(value: &Value) -> String {
    match value {
        Value::String(s) => format!("the string \"{s}\""),
        other => format!("{} {other}", other.type_str()),
    }
}

impl OptionValue for bool {
    fn shape() -> Shape {
        Shape::Bool
    }
    fn from_toml(value: Value) -> Result<Self, String> {
        match value {
            Value::Boolean(b) => Ok(b),
            other => Err(format!("expected true or false, found {}", found(&other))),
        }
    }
    fn to_toml(&self) -> Option<Value> {
        Some(Value::Boolean(*self))
    }
}

macro_rules! integer_value {
    ($($t:ty),*) => {$(
        impl OptionValue for $t {
            fn shape() -> Shape {
                Shape::Integer
            }
            fn from_toml(value: Value) -> Result<Self, String> {
                match value {
                    Value::Integer(i) => <$t>::try_from(i).map_err(|_| {
                        format!("{i} is out of range ({} to {})", <$t>::MIN, <$t>::MAX)
                    }),
                    other => Err(format!("expected an integer, found {}", found(&other))),
                }
            }
            fn to_toml(&self) -> Option<Value> {
                // Every integer type used for options fits an i64 (u64 values
                // above i64::MAX could not have been read from TOML either).
                Some(Value::Integer(i64::try_from(*self).unwrap_or(i64::MAX)))
            }
        }
    )*};
}
integer_value!(u8, u16, u32, u64, usize, i32, i64);

impl OptionValue for f64 {
    fn shape() -> Shape {
        Shape::Float
    }
    fn from_toml(value: Value) -> Result<Self, String> {
        match value {
            Value::Float(x) => Ok(x),
            Value::Integer(i) => Ok(i as f64),
            other => Err(format!("expected a number, found {}", found(&other))),
        }
    }
    fn to_toml(&self) -> Option<Value> {
        Some(Value::Float(*self))
    }
}

impl OptionValue for String {
    fn shape() -> Shape {
        Shape::String
    }
    fn from_toml(value: Value) -> Result<Self, String> {
        match value {
            Value::String(s) => Ok(s),
            other => Err(format!("expected a string, found {}", found(&other))),
        }
    }
    fn to_toml(&self) -> Option<Value> {
        Some(Value::String(self.clone()))
    }
}

impl OptionValue for PathBuf {
    fn shape() -> Shape {
        Shape::Path
    }
    fn from_toml(value: Value) -> Result<Self, String> {
        match value {
            Value::String(s) if !s.is_empty() => Ok(PathBuf::from(s)),
            Value::String(_) => Err("the path is empty".into()),
            other => Err(format!("expected a path string, found {}", found(&other))),
        }
    }
    fn to_toml(&self) -> Option<Value> {
        Some(Value::String(self.display().to_string()))
    }
}

impl OptionValue for IpAddr {
    fn shape() -> Shape {
        Shape::Text("IP address")
    }
    fn from_toml(value: Value) -> Result<Self, String> {
        match value {
            Value::String(s) => s
                .parse()
                .map_err(|_| format!("`{s}` is not an IPv4 or IPv6 address")),
            other => Err(format!(
                "expected an IP address string, found {}",
                found(&other)
            )),
        }
    }
    fn to_toml(&self) -> Option<Value> {
        Some(Value::String(self.to_string()))
    }
}

/// Durations are strings with a unit (humantime's syntax: `"2s"`, `"500ms"`,
/// `"1m30s"`, `"250us"`): a bare number would leave the unit to guess.
impl OptionValue for Duration {
    fn shape() -> Shape {
        Shape::Duration
    }
    fn from_toml(value: Value) -> Result<Self, String> {
        let no_unit = |n: &str| format!("{n} has no unit: write e.g. \"{n}ms\" or \"{n}s\"");
        match value {
            Value::String(s) if s.trim().parse::<f64>().is_ok() => Err(no_unit(s.trim())),
            Value::String(s) => humantime::parse_duration(s.trim()).map_err(|e| {
                format!("`{s}` is not a duration ({e}); write e.g. \"2s\" or \"500ms\"")
            }),
            Value::Integer(i) => Err(no_unit(&i.to_string())),
            other => Err(format!(
                "expected a duration such as \"2s\" or \"500ms\", found {}",
                found(&other)
            )),
        }
    }
    fn to_toml(&self) -> Option<Value> {
        Some(Value::String(humantime::format_duration(*self).to_string()))
    }
}

impl<T: OptionValue> OptionValue for Option<T> {
    fn shape() -> Shape {
        T::shape()
    }
    fn from_toml(value: Value) -> Result<Self, String> {
        T::from_toml(value).map(Some)
    }
    fn to_toml(&self) -> Option<Value> {
        self.as_ref().and_then(T::to_toml)
    }
}

/// A list; a single value stands for a list of one (`qtype = "A"`).
impl<T: OptionValue> OptionValue for Vec<T> {
    fn shape() -> Shape {
        Shape::List(Box::new(T::shape()))
    }
    fn from_toml(value: Value) -> Result<Self, String> {
        match value {
            Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, item)| T::from_toml(item).map_err(|e| format!("item {}: {e}", i + 1)))
                .collect(),
            single => T::from_toml(single).map(|v| vec![v]),
        }
    }
    fn to_toml(&self) -> Option<Value> {
        Some(Value::Array(self.iter().filter_map(T::to_toml).collect()))
    }
}

/// Checks a value against its declared range (`#[option(range = LOW..=HIGH)]`).
pub fn check_range<T: PartialOrd + OptionValue>(
    key: &str,
    value: &T,
    low: T,
    high: T,
) -> Result<(), OptionError> {
    if *value < low || *value > high {
        let text = |v: &T| v.to_toml().map_or_else(String::new, |v| v.to_string());
        return Err(OptionError::at(
            key,
            format!(
                "must be from {} to {} (is {})",
                text(&low),
                text(&high),
                text(value)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(
            Duration::from_toml(Value::String("1m30s".into())),
            Ok(Duration::from_secs(90))
        );
        assert_eq!(
            Duration::from_toml(Value::String("250ms".into())),
            Ok(Duration::from_millis(250))
        );
        let e = Duration::from_toml(Value::Integer(3000)).unwrap_err();
        assert!(e.contains("\"3000ms\""), "{e}");
        assert_eq!(
            Duration::from_millis(2500).to_toml(),
            Some(Value::String("2s 500ms".into()))
        );
    }

    #[test]
    fn integers_check_their_type_range() {
        assert_eq!(u16::from_toml(Value::Integer(53)), Ok(53));
        let e = u16::from_toml(Value::Integer(70_000)).unwrap_err();
        assert_eq!(e, "70000 is out of range (0 to 65535)");
        let e = u32::from_toml(Value::String("5".into())).unwrap_err();
        assert_eq!(e, "expected an integer, found the string \"5\"");
    }

    #[test]
    fn a_single_value_is_a_list_of_one() {
        assert_eq!(
            Vec::<String>::from_toml(Value::String("A".into())),
            Ok(vec!["A".to_string()])
        );
        let e = Vec::<u16>::from_toml(Value::Array(vec![Value::Integer(1), Value::Boolean(true)]))
            .unwrap_err();
        assert_eq!(e, "item 2: expected an integer, found boolean true");
    }

    #[test]
    fn ranges_name_both_ends() {
        let e = check_range("threads", &0u32, 1, 100).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("threads"));
        assert_eq!(e.message, "must be from 1 to 100 (is 0)");
        assert!(check_range("threads", &100u32, 1, 100).is_ok());
    }
}
