//! The one error type stages return.
//!
//! [`StageError`] is a boxed [`ErrorKind`]: one pointer wide, so the
//! `Result<Option<Object>, StageError>` that every `produce` call returns stays
//! small on the per-packet path.

use std::fmt;
use std::path::PathBuf;

/// What went wrong; see [`StageError::kind`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An I/O error on a named file or stream.
    #[error("{path}: {error}")]
    Io {
        /// The file (or `-` for standard input/output).
        path: PathBuf,
        /// What the operating system said.
        error: std::io::Error,
    },
    /// A file that is not in a format the stage reads.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it, and where.
        message: String,
    },
    /// Options that are well-typed but make no sense together, or a missing one.
    #[error("{module}: {message}")]
    Config {
        /// The module's dotted name.
        module: String,
        /// What is wrong.
        message: String,
    },
    /// An option of the stage's table has the wrong type, is unknown or missing.
    #[error("{module}: {}{message}", key.as_ref().map(|k| format!("option `{k}`: ")).unwrap_or_default())]
    Option {
        /// The module's dotted name.
        module: String,
        /// The key at fault, when one is known.
        key: Option<String>,
        /// What is wrong, with the valid choices where there are few.
        message: String,
    },
    /// Anything else, with the stage's name for context.
    #[error("{module}: {message}")]
    Other {
        /// The module's dotted name.
        module: String,
        /// What went wrong.
        message: String,
    },
}

/// An error that stops a stage (and so the run). Per-packet problems such as a
/// malformed header are *not* errors: stages count them in their [`crate::StageStats`].
pub struct StageError(Box<ErrorKind>);

impl StageError {
    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0
    }

    /// Takes the kind out.
    pub fn into_kind(self) -> ErrorKind {
        *self.0
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        ErrorKind::Io {
            path: path.into(),
            error,
        }
        .into()
    }

    /// A configuration error of `module`.
    pub fn config(module: &str, message: impl Into<String>) -> Self {
        ErrorKind::Config {
            module: module.to_string(),
            message: message.into(),
        }
        .into()
    }

    /// An error in option `key` of `module`.
    pub fn option(module: &str, key: Option<&str>, message: impl Into<String>) -> Self {
        ErrorKind::Option {
            module: module.to_string(),
            key: key.map(str::to_string),
            message: message.into(),
        }
        .into()
    }

    /// A file-format error of `path`.
    pub fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        ErrorKind::Format {
            path: path.into(),
            message: message.into(),
        }
        .into()
    }

    /// Any other error of `module`.
    pub fn other(module: &str, message: impl Into<String>) -> Self {
        ErrorKind::Other {
            module: module.to_string(),
            message: message.into(),
        }
        .into()
    }

    /// True when this is a write to a closed pipe (`dnsluice ... | head`).
    pub fn is_broken_pipe(&self) -> bool {
        matches!(&*self.0, ErrorKind::Io { error, .. } if error.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

impl From<ErrorKind> for StageError {
    fn from(kind: ErrorKind) -> Self {
        StageError(Box::new(kind))
    }
}

impl fmt::Display for StageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for StageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for StageError {}
