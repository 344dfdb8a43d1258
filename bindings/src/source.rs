//! Lua source files: loaded with their path as the chunk name, so errors
//! read `file:line:`.

use mlua::{Function, Lua};
use std::path::Path;

/// Loads and runs the Lua file at `path` in `lua`; errors name `path:line`.
/// A first line starting with `#` (a shebang) is skipped, as `lua` does.
pub fn exec_file(lua: &Lua, path: &Path) -> mlua::Result<()> {
    let chunk = load_file(lua, path)?;
    chunk.call::<()>(())
}

pub fn load_file(lua: &Lua, path: &Path) -> mlua::Result<Function> {
    let mut text = std::fs::read(path)
        .map_err(|e| mlua::Error::runtime(format!("cannot read {}: {e}", path.display())))?;
    if text.first() == Some(&b'#') {
        // Keep the line (and so every line number), as a comment.
        text.splice(0..0, *b"--");
    }
    lua.load(text)
        .set_name(format!("@{}", path.display()))
        .into_function()
}
