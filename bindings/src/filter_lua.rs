//! `filter.lua`: a Lua function decides, object by object, what passes.

use crate::error::describe;
use crate::view::{Cursor, ViewError};
use dnsluice_core::{FlatMap, Object, Receiver, StageError, StageStats};
use mlua::{Function, Lua, Value};

/// Name of the Lua-calling filter in the registry and in Lua.
pub const FILTER_LUA: &str = "filter.lua";

/// `filter.lua`: calls a Lua function for every object and passes on those
/// for which it returns true.
pub struct LuaFilter {
    func: Function,
    cursor: Cursor,
    passed: u64,
    // A state made for a TOML stage lives as long as the stage.
    _lua: Option<Lua>,
}

impl LuaFilter {
    /// Calls `func`; `lua` is the state it belongs to when the filter owns it.
    pub fn new(func: Function, lua: Option<Lua>) -> Result<Self, ViewError> {
        Ok(LuaFilter {
            func,
            cursor: Cursor::new()?,
            passed: 0,
            _lua: lua,
        })
    }
}

impl FlatMap for LuaFilter {
    fn process<R: Receiver + ?Sized>(
        &mut self,
        obj: &mut Object<'_>,
        out: &mut R,
    ) -> Result<(), StageError> {
        let keep = self
            .cursor
            .lend(obj, |view| self.func.call::<Value>(view))
            .map_err(|e| StageError::other(FILTER_LUA, e.to_string()))?
            .map_err(|e| StageError::other(FILTER_LUA, describe(&e)))?;
        if !matches!(keep, Value::Nil | Value::Boolean(false)) {
            self.passed += 1;
            out.receive(obj)?;
        }
        Ok(())
    }

    fn stats(&self) -> StageStats {
        let mut stats = StageStats::new(FILTER_LUA);
        stats.output = self.passed;
        stats
    }
}
