//! `filter.lua`: a Lua function decides, object by object, what passes.

use crate::error::describe;
use crate::view::{Cursor, ViewError};
use dnsluice_core::{FlatMap, Object, Receiver, StageError, StageStats};
use mlua::{ffi, Function, LightUserData, Lua, Value};
use std::ffi::c_int;

/// Name of the Lua-calling filter in the registry and in Lua.
pub const FILTER_LUA: &str = "filter.lua";

/// `filter.lua`: calls a Lua function for every object and passes on those
/// for which it returns true.
pub struct LuaFilter {
    func: Function,
    cursor: Cursor,
    passed: u64,
    /// For a state the filter owns: the function called straight through
    /// the C API.
    direct: Option<Direct>,
    // A state made for a TOML stage lives as long as the stage (declared
    // last: dropped after `direct` lets go of its reference).
    _lua: Option<Lua>,
}

/// A function called with `lua_pcall` on the main thread of a state that
/// nothing else uses (a TOML stage's own): half the cost of
/// [`Function::call`], which sets up a protected call of its own around it.
struct Direct {
    state: *mut ffi::lua_State,
    /// The function, in the state's registry.
    func: c_int,
    /// [`traceback`], in the state's registry (pushing a C function anew
    /// for every call would allocate a closure with LuaJIT).
    traceback: c_int,
}

impl LuaFilter {
    /// Calls `func`; `lua` is the state it belongs to when the filter owns
    /// it (then nothing else may run code in it).
    pub fn new(func: Function, lua: Option<Lua>) -> Result<Self, ViewError> {
        let direct = match &lua {
            Some(lua) => {
                Some(Direct::new(lua, &func).map_err(|_| ViewError::NotAnObject("a function"))?)
            }
            None => None,
        };
        Ok(LuaFilter {
            func,
            cursor: Cursor::new()?,
            passed: 0,
            direct,
            _lua: lua,
        })
    }
}

impl Direct {
    fn new(lua: &Lua, func: &Function) -> mlua::Result<Direct> {
        let mut state = std::ptr::null_mut();
        let (mut reference, mut handler) = (0, 0);
        // SAFETY: the closure pops the function it was given and the one it
        // pushes into the registry, and leaves the stack as it found it.
        unsafe {
            lua.exec_raw::<()>(func.clone(), |l| {
                state = l;
                reference = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
                ffi::lua_pushcfunction(l, traceback);
                handler = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
            })?;
        }
        Ok(Direct {
            state,
            func: reference,
            traceback: handler,
        })
    }

    /// Calls the function with `view`: whether it returned a true value, or
    /// the error's message and traceback.
    fn call(&self, view: LightUserData) -> Result<bool, String> {
        let l = self.state;
        // SAFETY: `l` is the main thread of a state only this filter uses,
        // alive as long as the filter; the stack is put back as it was, and
        // no Lua error escapes `lua_pcall`.
        unsafe {
            let top = ffi::lua_gettop(l);
            if ffi::lua_checkstack(l, 3) == 0 {
                return Err("Lua stack overflow".to_string());
            }
            ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, self.traceback as _);
            ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, self.func as _);
            ffi::lua_pushlightuserdata(l, view.0);
            let status = ffi::lua_pcall(l, 1, 1, top + 1);
            let result = if status == ffi::LUA_OK {
                Ok(ffi::lua_toboolean(l, -1) != 0)
            } else {
                let mut len = 0;
                let text = ffi::lua_tolstring(l, -1, &mut len);
                Err(if text.is_null() {
                    "error (not a string)".to_string()
                } else {
                    String::from_utf8_lossy(std::slice::from_raw_parts(text.cast(), len))
                        .into_owned()
                })
            };
            ffi::lua_settop(l, top);
            result
        }
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        // SAFETY: as in `call`; the state is dropped after this.
        unsafe {
            ffi::luaL_unref(self.state, ffi::LUA_REGISTRYINDEX, self.func);
            ffi::luaL_unref(self.state, ffi::LUA_REGISTRYINDEX, self.traceback);
        }
    }
}

/// Message handler of [`Direct::call`]: the message and a traceback.
unsafe extern "C-unwind" fn traceback(l: *mut ffi::lua_State) -> c_int {
    unsafe {
        let message = ffi::lua_tostring(l, 1);
        ffi::luaL_traceback(l, l, message, 1);
    }
    1
}

impl FlatMap for LuaFilter {
    fn process<R: Receiver + ?Sized>(
        &mut self,
        obj: &mut Object<'_>,
        out: &mut R,
    ) -> Result<(), StageError> {
        let keep = match &self.direct {
            Some(direct) => self
                .cursor
                .lend(obj, |view| direct.call(view))
                .map_err(|e| StageError::other(FILTER_LUA, e.to_string()))?
                .map_err(|e| StageError::other(FILTER_LUA, e))?,
            None => {
                let keep = self
                    .cursor
                    .lend(obj, |view| self.func.call::<Value>(view))
                    .map_err(|e| StageError::other(FILTER_LUA, e.to_string()))?
                    .map_err(|e| StageError::other(FILTER_LUA, describe(&e)))?;
                !matches!(keep, Value::Nil | Value::Boolean(false))
            }
        };
        if keep {
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
