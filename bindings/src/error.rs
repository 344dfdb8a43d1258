//! Lua errors as people read them: `file:line: message`, then a traceback.

use mlua::Lua;
use std::fmt::Display;

/// A runtime error for the Lua code that called the current Rust function,
/// prefixed with its `file:line:` as Lua's own errors are.
pub fn located(lua: &Lua, message: impl Display) -> mlua::Error {
    let place = lua
        .inspect_stack(1, |d| {
            let line = d.current_line()?;
            let source = d.source().short_src?.into_owned();
            Some(format!("{source}:{line}: "))
        })
        .flatten()
        .unwrap_or_default();
    mlua::Error::runtime(format!("{place}{message}"))
}

/// The message of an mlua error without mlua's wrapping: the innermost cause,
/// then the Lua traceback(s).
pub fn describe(error: &mlua::Error) -> String {
    match error {
        mlua::Error::CallbackError { traceback, cause } => {
            let inner = describe(cause);
            if inner.contains("stack traceback:") {
                inner
            } else {
                format!("{inner}\n{traceback}")
            }
        }
        mlua::Error::RuntimeError(message) => message.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::ExternalError(e) => e.to_string(),
        mlua::Error::WithContext { context, cause } => format!("{context}: {}", describe(cause)),
        other => other.to_string(),
    }
}
