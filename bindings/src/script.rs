//! `dnsluice script FILE.lua [ARGS...]`: a script run in a state with every
//! module of the registry.

use crate::error::describe;
use crate::source::load_file;
use crate::state::new_state;
use dnsluice_core::Registry;
use std::path::Path;

/// Why a script failed.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The script file could not be read.
    #[error("cannot read script {path}: {error}")]
    Read {
        /// The script.
        path: String,
        /// What the system said.
        error: std::io::Error,
    },
    /// A Lua error: `file:line: message` and a traceback.
    #[error("{0}")]
    Lua(String),
}

/// Runs the script at `path` with `args` (`arg[1]`...) using `registry`.
pub fn run_script(registry: &Registry, path: &Path, args: &[String]) -> Result<(), ScriptError> {
    let text_path = path.display().to_string();
    if let Err(error) = std::fs::metadata(path) {
        return Err(ScriptError::Read {
            path: text_path,
            error,
        });
    }
    let mut all = vec![text_path];
    all.extend(args.iter().cloned());
    let lua = new_state(registry, &all).map_err(|e| ScriptError::Lua(describe(&e)))?;
    let chunk = load_file(&lua, path).map_err(|e| ScriptError::Lua(describe(&e)))?;
    chunk
        .call::<()>(())
        .map_err(|e| ScriptError::Lua(describe(&e)))
}
