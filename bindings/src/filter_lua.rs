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

/// A function called with `lua_pcall` on the main thread of a state that
/// nothing else uses (a TOML stage's own): half the cost of
/// [`Function::call`], which sets up a protected call of its own around it.
///
/// The message handler and the function stay on the state's stack, at
/// `base - 1` and `base`, for the filter's life: a call copies the function
/// (no registry look-up), pushes the view and calls; the stack space is
/// reserved once. With Lua 5.4 the last call's result stays at `base + 1`
/// and the next call copies the function over it (cheaper than popping it).
struct Direct {
    state: *mut ffi::lua_State,
    /// The stack index of the function; [`traceback`] is just below it.
    base: c_int,
}

/// Stack slots [`Direct::call`] uses above `base`: the function's copy, the
/// view, the result (Lua gives the function its own LUA_MINSTACK).
const CALL_SLOTS: c_int = 3;

impl Direct {
    fn new(lua: &Lua, func: &Function) -> mlua::Result<Direct> {
        let mut state = std::ptr::null_mut();
        let mut reference = 0;
        // SAFETY: the closure pops the function it was given into the
        // registry and leaves the stack as it found it.
        unsafe {
            lua.exec_raw::<()>(func.clone(), |l| {
                state = l;
                reference = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
            })?;
        }
        // SAFETY: `state` is the main thread of a state only this filter
        // uses, and no Lua code runs now: the two values pushed here stay
        // below everything later calls push (mlua puts its stack back as it
        // found it). None of these calls raises an error.
        unsafe {
            if ffi::lua_checkstack(state, 2 + CALL_SLOTS) == 0 {
                ffi::luaL_unref(state, ffi::LUA_REGISTRYINDEX, reference);
                return Err(mlua::Error::runtime("Lua stack overflow"));
            }
            ffi::lua_pushcfunction(state, traceback);
            ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, reference as _);
            ffi::luaL_unref(state, ffi::LUA_REGISTRYINDEX, reference);
            let base = ffi::lua_gettop(state);
            #[cfg(not(feature = "luajit"))]
            ffi::lua_pushnil(state);
            Ok(Direct { state, base })
        }
    }

    /// Calls the function with `view`: whether it returned a true value, or
    /// the error's message and traceback.
    fn call(&self, view: LightUserData) -> Result<bool, String> {
        let (l, base) = (self.state, self.base);
        // SAFETY: `l` is the main thread of a state only this filter uses,
        // alive as long as the filter; its stack is at `base` (`base + 1`
        // with Lua 5.4) between calls, with room for CALL_SLOTS more above
        // `base` (reserved in `new`: the stack never shrinks below what was
        // reserved), and no Lua error escapes `lua_pcall`.
        unsafe {
            #[cfg(not(feature = "luajit"))]
            ffi::lua_copy(l, base, base + 1);
            #[cfg(feature = "luajit")]
            ffi::lua_pushvalue(l, base);
            ffi::lua_pushlightuserdata(l, view.0);
            // One result either way (the value, or the message), at `base + 1`.
            let status = ffi::lua_pcall(l, 1, 1, base - 1);
            let result = if status == ffi::LUA_OK {
                Ok(ffi::lua_toboolean(l, -1) != 0)
            } else {
                Err(message(l))
            };
            #[cfg(feature = "luajit")]
            ffi::lua_settop(l, base);
            result
        }
    }
}

/// The error message on top of the stack of `l`.
///
/// # Safety
///
/// `l` must be a valid state with a value on its stack.
unsafe fn message(l: *mut ffi::lua_State) -> String {
    let mut len = 0;
    // SAFETY: see above; `lua_tolstring` raises nothing (null for a value
    // that is neither a string nor a number).
    unsafe {
        let text = ffi::lua_tolstring(l, -1, &mut len);
        if text.is_null() {
            return "error (not a string)".to_string();
        }
        String::from_utf8_lossy(std::slice::from_raw_parts(text.cast(), len)).into_owned()
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        // SAFETY: as in `call`; the state is dropped after this.
        unsafe { ffi::lua_settop(self.state, self.base - 2) }
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
