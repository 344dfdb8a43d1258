//! The one error type stages return.

use std::path::PathBuf;

/// An error that stops a stage (and so the run). Per-packet problems such as a
/// malformed header are *not* errors: stages count them in their [`crate::StageStats`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StageError {
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

impl StageError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StageError::Io {
            path: path.into(),
            error: source,
        }
    }

    /// True when this is a write to a closed pipe (`dnsluice ... | head`).
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, StageError::Io { error, .. } if error.kind() == std::io::ErrorKind::BrokenPipe)
    }

    /// A configuration error of `module`.
    pub fn config(module: &str, message: impl Into<String>) -> Self {
        StageError::Config {
            module: module.to_string(),
            message: message.into(),
        }
    }

    /// A file-format error of `path`.
    pub fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        StageError::Format {
            path: path.into(),
            message: message.into(),
        }
    }
}
