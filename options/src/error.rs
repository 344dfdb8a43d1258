//! What goes wrong when options are read.

use std::fmt;

/// An option that could not be read: which key, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError {
    /// The key at fault, when there is one.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl OptionError {
    /// An error about `key`.
    pub fn at(key: &str, message: impl Into<String>) -> Self {
        OptionError {
            key: Some(key.to_string()),
            message: message.into(),
        }
    }

    /// An error about the options as a whole (two keys that exclude each other, ...).
    pub fn general(message: impl Into<String>) -> Self {
        OptionError {
            key: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => write!(f, "key `{key}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for OptionError {}
