//! `string.lower` for Lua 5.4 without the copy when nothing changes.
//!
//! Lua 5.4's own makes a new string through a buffer every time (160 ns for
//! a 21-byte name here, against LuaJIT's 48 ns), and lower-casing names that
//! are already lower-case is what DNS scripts do most. This one maps bytes
//! as Lua's does, with the C library's `tolower` (read into a table, made
//! again whenever a script calls `os.setlocale`, so a locale applies the
//! same), and returns its argument itself when no byte changes: Lua strings
//! are values, so the result is the same. In the C locale (only `A`-`Z`
//! change) whether any byte changes is told eight bytes at a time.

use crate::ascii::has_upper;
use mlua::{ffi, Lua};
use std::cell::{Cell, RefCell};
use std::ffi::c_int;

thread_local! {
    /// `tolower` of every byte, as of the last `os.setlocale`.
    static TABLE: RefCell<[u8; 256]> = const { RefCell::new([0; 256]) };
    /// Whether [`TABLE`] is made (and the locale not changed since).
    static MADE: Cell<bool> = const { Cell::new(false) };
    /// Whether [`TABLE`] maps `A`-`Z` to `a`-`z` and every other byte to
    /// itself (the C locale's): a string with no ASCII capital is then its
    /// own lower case, which [`has_upper`] tells eight bytes at a time.
    static ASCII_ONLY: Cell<bool> = const { Cell::new(false) };
    /// Where a changed string is built.
    static BUFFER: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

extern "C" {
    fn tolower(c: c_int) -> c_int;
}

/// Replaces `string.lower` in `lua`, and wraps `os.setlocale` so that a new
/// locale is followed.
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let string: mlua::Table = lua.globals().get("string")?;
    // SAFETY: `lower` follows the Lua C API protocol (see its comments).
    string.set("lower", unsafe { lua.create_c_function(lower)? })?;
    let forget = lua.create_function(|_, ()| {
        MADE.set(false);
        Ok(())
    })?;
    lua.load(
        "local setlocale, forget = os.setlocale, ...\n\
         os.setlocale = function(...) forget() return setlocale(...) end",
    )
    .set_name("=dnsluice/strings")
    .call::<()>(forget)
}

/// Runs `f` with the lower-case table of the current locale.
fn with_table<R>(f: impl FnOnce(&[u8; 256]) -> R) -> R {
    TABLE.with_borrow_mut(|table| {
        if !MADE.get() {
            for (b, slot) in table.iter_mut().enumerate() {
                // SAFETY: `tolower` takes any value of `unsigned char`.
                *slot = unsafe { tolower(b as c_int) } as u8;
            }
            let ascii = table
                .iter()
                .enumerate()
                .all(|(b, &l)| l == (b as u8).to_ascii_lowercase());
            ASCII_ONLY.set(ascii);
            MADE.set(true);
        }
        f(table)
    })
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
        let mut out = std::mem::ManuallyDrop::new(BUFFER.take());
        let changed = with_table(|table| {
            if ASCII_ONLY.get() && !has_upper(bytes) {
                return None;
            }
            let first = bytes.iter().position(|&b| table[usize::from(b)] != b)?;
            out.clear();
            out.extend_from_slice(&bytes[..first]);
            out.extend(bytes[first..].iter().map(|&b| table[usize::from(b)]));
            Some(())
        });
        if changed.is_none() {
            BUFFER.set(std::mem::ManuallyDrop::into_inner(out));
            ffi::lua_settop(l, 1);
            return 1;
        }
        ffi::lua_pushlstring(l, out.as_ptr().cast(), out.len());
        BUFFER.set(std::mem::ManuallyDrop::into_inner(out));
        1
    }
}
