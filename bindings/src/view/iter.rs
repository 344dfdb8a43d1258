//! `x:iter(field, ...)` for the Lua C API: a C function that pulls the next
//! object and pushes its view and the fields named, so a loop that reads a
//! few fields calls into Rust once per object.

use super::index::{push_field, push_message, push_table, PUSHED_TABLE, SCRATCH, UNKNOWN};
use super::slots::with_part;
use crate::fields;
use mlua::{ffi, Lua};
use std::ffi::{c_int, c_void};
use std::rc::Rc;

/// What a pull iterator ([`push_iterator`]) reads from: the next object's
/// view (as its light userdata value), `None` at the end, or an error.
pub trait NextView {
    /// Makes the next object current and returns its view.
    fn next_view(&self) -> Result<Option<usize>, String>;
}

/// Registry name of the metatable of iterator states.
const ITER_META: &std::ffi::CStr = c"dnsluice.iter";

/// The upvalue of a pull iterator: what it pulls from and the fields it
/// returns with each object. `None` once collected.
#[repr(C)]
struct IterState {
    /// [`ITER_MAGIC`]: told apart from any other userdata of the same size
    /// (defence in depth: only the debug library, which dnsluice's states do
    /// not load, could put another value in the iterator's upvalue or call
    /// its `__gc`).
    magic: u64,
    source: Option<(Rc<dyn NextView>, Vec<fields::FieldKey>)>,
}

/// The first field of every [`IterState`].
const ITER_MAGIC: u64 = 0x646e_736c_7569_6365; // "dnsluice"

/// The iterator state at `index`, or null when the value there is not one.
/// Cheaper than `luaL_checkudata` (no registry look-up) on the per-object path.
unsafe fn iter_state(l: *mut ffi::lua_State, index: c_int) -> *mut IterState {
    unsafe {
        if ffi::lua_type(l, index) != ffi::LUA_TUSERDATA
            || ffi::lua_rawlen(l, index) != std::mem::size_of::<IterState>()
        {
            return std::ptr::null_mut();
        }
        let ud = ffi::lua_touserdata(l, index) as *mut IterState;
        // The size matches, so the first 8 bytes are readable.
        if ud.is_null() || (*ud).magic != ITER_MAGIC {
            return std::ptr::null_mut();
        }
        ud
    }
}

/// Pushes a pull iterator for a generic `for`: a C function that returns
/// the next object's view, followed by the fields `keys` of the object (the
/// object's own or its DNS part's; `nil` for a DNS field of an object that is
/// not DNS), and `nil` at the end. One call from Lua per object, whatever the
/// number of fields.
pub fn push_iterator(
    lua: &Lua,
    source: Rc<dyn NextView>,
    keys: Vec<fields::FieldKey>,
) -> mlua::Result<mlua::Function> {
    let state = IterState {
        magic: ITER_MAGIC,
        source: Some((source, keys)),
    };
    // SAFETY: the closure pushes one function and leaves the stack otherwise
    // as it was. The state moves into a userdata whose `__gc` drops it (and
    // only it: `iter_state` checks size and magic); a memory error before the
    // move leaks it.
    unsafe {
        lua.exec_raw::<mlua::Function>((), move |l| {
            if ffi::luaL_newmetatable(l, ITER_META.as_ptr()) != 0 {
                ffi::lua_pushcfunction(l, iter_gc);
                ffi::lua_setfield(l, -2, c"__gc".as_ptr());
            }
            let ud = ffi::lua_newuserdata(l, std::mem::size_of::<IterState>()) as *mut IterState;
            debug_assert!(ud.is_aligned());
            ud.write(state);
            ffi::lua_pushvalue(l, -2);
            ffi::lua_setmetatable(l, -2);
            ffi::lua_pushcclosure(l, iter_next, 1);
            ffi::lua_replace(l, -2);
        })
    }
}

/// `__gc` of an iterator's state.
unsafe extern "C-unwind" fn iter_gc(l: *mut ffi::lua_State) -> c_int {
    unsafe {
        let ud = iter_state(l, 1);
        // Taking the state leaves `None`: a second call (which only the
        // debug library could make) drops nothing.
        if !ud.is_null() {
            drop((*ud).source.take());
        }
    }
    0
}

/// The iterator function: one object and its fields per call.
unsafe extern "C-unwind" fn iter_next(l: *mut ffi::lua_State) -> c_int {
    let n = unsafe { iter_inner(l) };
    if n < 0 {
        // The message is on the stack.
        unsafe { ffi::lua_error(l) }
    }
    n
}

unsafe fn iter_inner(l: *mut ffi::lua_State) -> c_int {
    unsafe {
        let ud = iter_state(l, ffi::lua_upvalueindex(1));
        // The state lives as long as this function's closure, which is being
        // called (so it is not garbage); only `iter_gc` changes it.
        let Some((source, keys)) = ud.as_ref().and_then(|state| state.source.as_ref()) else {
            push_message(l, "iterator used after it was collected");
            return -1;
        };
        let value = match source.next_view() {
            Ok(Some(value)) => value,
            Ok(None) => {
                ffi::lua_pushnil(l);
                return 1;
            }
            Err(e) => {
                push_message(l, &e);
                drop(e);
                return -1;
            }
        };
        if ffi::lua_checkstack(l, keys.len() as c_int + 1) == 0 {
            push_message(l, "too many fields for the Lua stack");
            return -1;
        }
        ffi::lua_pushlightuserdata(l, value as *mut c_void);
        // One scratch buffer for all the fields (see `push_field`).
        let mut scratch = SCRATCH.take();
        for key in keys {
            let view = with_part(value, key.part);
            match push_field(l, view, key.name, &mut scratch) {
                PUSHED_TABLE => {
                    // The builder is a Lua call, which may raise: nothing
                    // that needs dropping may be alive here (the buffer goes
                    // back to its cell meanwhile).
                    SCRATCH.set(scratch);
                    ffi::lua_pushlstring(l, key.name.as_ptr().cast(), key.name.len());
                    push_table(l, view, -1);
                    ffi::lua_replace(l, -2);
                    scratch = SCRATCH.take();
                }
                // A DNS field of an object that is not DNS.
                UNKNOWN => ffi::lua_pushnil(l),
                1 => {}
                _ => {
                    SCRATCH.set(scratch);
                    return -1;
                }
            }
        }
        SCRATCH.set(scratch);
        keys.len() as c_int + 1
    }
}
