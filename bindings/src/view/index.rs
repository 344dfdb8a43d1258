//! `obj.KEY` for light views: one C function written against the Lua C API
//! ([`light_index`]) reads the key, checks the view, and pushes the field
//! (from the object's record, or a string made from the object). Fields that
//! are tables are built by an mlua function registered under [`TABLES_KEY`].

use super::slots::{decode, with_live, with_part, STALE};
use crate::fields::{self, Field};
use mlua::ffi;
use std::ffi::{c_int, c_void};

/// Registry key of the table of view methods (`copy`, ...).
pub const METHODS_KEY: &std::ffi::CStr = c"dnsluice.view.methods";
/// Registry key of the function that builds table-valued fields.
pub const TABLES_KEY: &std::ffi::CStr = c"dnsluice.view.tables";

/// A view method (`copy`), or the error for a name that is neither a field
/// nor a method.
pub fn method(lua: &mlua::Lua, key: &mlua::LuaString) -> mlua::Result<mlua::Value> {
    let methods: mlua::Table =
        lua.named_registry_value(METHODS_KEY.to_str().unwrap_or_default())?;
    match methods.raw_get::<mlua::Value>(key)? {
        mlua::Value::Nil => Err(mlua::Error::runtime(format!(
            "objects have no field `{}` (fields: {})",
            key.display(),
            fields::NAMES
        ))),
        v => Ok(v),
    }
}

thread_local! {
    /// The buffer string fields are written to before Lua copies them.
    pub static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Pushes `msg` for [`ffi::lua_error`].
pub unsafe fn push_message(l: *mut ffi::lua_State, msg: &str) {
    unsafe {
        ffi::luaL_where(l, 1);
        ffi::lua_pushlstring(l, msg.as_ptr().cast(), msg.len());
        ffi::lua_concat(l, 2);
    }
}

/// `__index` of views: `obj.KEY`.
///
/// Nothing that needs dropping is alive when Lua may leave this function by a
/// long jump (an error, or an error in the table builder it calls): the
/// object is `Copy`, and the scratch buffer is put back before any call that
/// can raise.
pub unsafe extern "C-unwind" fn light_index(l: *mut ffi::lua_State) -> c_int {
    let n = unsafe { index_inner(l) };
    if n < 0 {
        // The message is on the stack.
        unsafe { ffi::lua_error(l) }
    }
    n
}

unsafe fn index_inner(l: *mut ffi::lua_State) -> c_int {
    unsafe {
        let value = ffi::lua_touserdata(l, 1) as usize;
        let mut len = 0usize;
        let key = ffi::lua_tolstring(l, 2, &mut len);
        // Null for anything but a string or a number (which Lua converts
        // in place: its string then names no field).
        if key.is_null() {
            push_message(l, "object fields are named by strings");
            return -1;
        }
        let key = std::slice::from_raw_parts(key.cast::<u8>(), len);
        let mut scratch = SCRATCH.take();
        let pushed = push_field(l, value, key, &mut scratch);
        SCRATCH.set(scratch);
        match pushed {
            PUSHED_TABLE => {
                // The key is still at index 2.
                push_table(l, value, 2);
                1
            }
            UNKNOWN => {
                ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, METHODS_KEY.as_ptr());
                ffi::lua_pushvalue(l, 2);
                ffi::lua_rawget(l, -2);
                if ffi::lua_type(l, -1) == ffi::LUA_TNIL {
                    let msg = format!(
                        "objects have no field `{}` (fields: {})",
                        String::from_utf8_lossy(key),
                        fields::NAMES
                    );
                    push_message(l, &msg);
                    drop(msg);
                    return -1;
                }
                1
            }
            n => n,
        }
    }
}

/// [`push_field`]: the field is a table; nothing was pushed ([`push_table`] builds it).
pub const PUSHED_TABLE: c_int = 0;
/// [`push_field`]: no such field; nothing was pushed.
pub const UNKNOWN: c_int = -2;

/// Pushes the field `key` of the view `value` (1), or an error message for
/// [`ffi::lua_error`] (-1); pushes nothing for a table-valued field
/// ([`PUSHED_TABLE`]) or a name that is not a field ([`UNKNOWN`]).
///
/// String fields are written to `scratch`, which the caller takes out of
/// [`SCRATCH`] and puts back after its last push.
///
/// Raises no Lua error itself. A push may (out of memory): the scratch
/// buffer is then lost, not freed twice (it is out of its cell while Lua
/// copies from it, so code that Lua runs meanwhile gets a fresh one), and the
/// object is `Copy`.
pub unsafe fn push_field(
    l: *mut ffi::lua_State,
    value: usize,
    key: &[u8],
    scratch: &mut Vec<u8>,
) -> c_int {
    unsafe {
        // Computed under the slot's borrow, without copying the object: the
        // strings it returns borrow the producer's data (or are static), which
        // stays put until the slot is cleared, and nothing below runs Lua
        // code that could clear it before the string is pushed.
        let (slot, gen, part) = decode(value);
        let field = with_live(slot, gen, |obj, rec| {
            fields::field(obj, rec, part, key, scratch)
        });
        let Some(field) = field else {
            push_message(l, STALE);
            return -1;
        };
        match field {
            Field::Nil => {
                ffi::lua_pushnil(l);
                1
            }
            Field::Bool(b) => {
                ffi::lua_pushboolean(l, c_int::from(b));
                1
            }
            Field::Int(i) => {
                ffi::lua_pushinteger(l, i as ffi::lua_Integer);
                1
            }
            Field::Wide(i, how) => {
                // With LuaJIT maybe a call to make a cdata: may raise as a
                // push may (out of memory).
                crate::wide::push(l, i, how);
                1
            }
            Field::Num(x) => {
                ffi::lua_pushnumber(l, x);
                1
            }
            Field::Str(s) => {
                ffi::lua_pushlstring(l, s.as_ptr().cast(), s.len());
                1
            }
            Field::Scratch => {
                ffi::lua_pushlstring(l, scratch.as_ptr().cast(), scratch.len());
                1
            }
            Field::View(part) => {
                ffi::lua_pushlightuserdata(l, with_part(value, part) as *mut c_void);
                1
            }
            Field::Table => PUSHED_TABLE,
            Field::Unknown => UNKNOWN,
        }
    }
}

/// Pushes the table-valued field named by the string at stack index `key` of
/// the view `value`, built by the registered table builder (which may raise).
pub unsafe fn push_table(l: *mut ffi::lua_State, value: usize, key: c_int) {
    unsafe {
        let key = ffi::lua_absindex(l, key);
        ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, TABLES_KEY.as_ptr());
        ffi::lua_pushlightuserdata(l, value as *mut c_void);
        ffi::lua_pushvalue(l, key);
        ffi::lua_call(l, 2, 1);
    }
}
