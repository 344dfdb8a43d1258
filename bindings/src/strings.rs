//! `string.lower` for Lua 5.4 without the copy when nothing changes.
//!
//! Lua 5.4's own makes a new string through a buffer every time (160 ns for
//! a 21-byte name here, against LuaJIT's 48 ns), and lower-casing names that
//! are already lower-case is what DNS scripts do most. This one maps each
//! byte with the C library's `tolower` as Lua's does (so a locale set with
//! `os.setlocale` applies the same), and returns its argument itself when
//! no byte changes: Lua strings are values, so the result is the same.

use mlua::{ffi, Lua};
use std::ffi::c_int;

thread_local! {
    static BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

extern "C" {
    fn tolower(c: c_int) -> c_int;
}

/// Replaces `string.lower` in `lua`.
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let string: mlua::Table = lua.globals().get("string")?;
    // SAFETY: `lower` follows the Lua C API protocol (see its comments).
    string.set("lower", unsafe { lua.create_c_function(lower)? })
}

/// `string.lower(s)`.
///
/// Nothing that needs dropping is alive when Lua may leave by a long jump:
/// `luaL_checklstring` raises before anything is made, and the buffer the
/// new string is built in is a `ManuallyDrop` taken out of its cell (lost,
/// not freed twice, if pushing the string runs out of memory).
unsafe extern "C-unwind" fn lower(l: *mut ffi::lua_State) -> c_int {
    unsafe {
        let mut len = 0usize;
        // Converts a number argument to a string in place, as Lua's does.
        let text = ffi::luaL_checklstring(l, 1, &mut len);
        let bytes = std::slice::from_raw_parts(text.cast::<u8>(), len);
        let Some(first) = bytes
            .iter()
            .position(|&b| tolower(c_int::from(b)) != c_int::from(b))
        else {
            ffi::lua_settop(l, 1);
            return 1;
        };
        let mut out = std::mem::ManuallyDrop::new(BUFFER.take());
        out.clear();
        out.extend_from_slice(&bytes[..first]);
        out.extend(bytes[first..].iter().map(|&b| tolower(c_int::from(b)) as u8));
        ffi::lua_pushlstring(l, out.as_ptr().cast(), out.len());
        BUFFER.set(std::mem::ManuallyDrop::into_inner(out));
        1
    }
}
