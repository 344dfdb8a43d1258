//! Objects as Lua sees them: views that are valid until the next object.
//!
//! A view is a Lua *light userdata* whose value names a cursor slot, the
//! generation of the object the slot held when the view was made, and the
//! part of the object it stands for (the object, its DNS message, the
//! message's EDNS): see [`slots`]. Making one allocates nothing and leaves
//! nothing for the garbage collector. Every field access checks the
//! generation: a view kept past the next object is a clear Lua error, never
//! a read of freed memory. `obj:copy()` makes an owned copy (a full
//! userdata, [`owned::OwnedView`]).
//!
//! The hot path (`obj.qname`, `obj.dns`, ...) is one C function written
//! against the Lua C API ([`index::light_index`]): it reads the key, checks
//! the generation, reads the field from the object's record (filled once per
//! object, see [`crate::record`]) or makes the string, and pushes it.
//! `x:iter(field, ...)` is another C function ([`iter::push_iterator`]).
//! With LuaJIT, `x:iter()` over a chain of native stages hands out FFI views
//! instead, read by Lua code the JIT compiles (`jit`).
//!
//! # Safety
//!
//! A slot holds an `Object<'static>`: a lie about the lifetime, kept true by
//! the two ways objects are put there. [`Cursor::lend`] clears the slot
//! before it returns (the object outlives the call). A pull chain stores the
//! object its producer returned and clears the slot before it touches the
//! producer again and before the producer is dropped ([`Cursor::hold`] is
//! `unsafe` and documents this). While Rust code reads an object out of a
//! slot ([`with_view`]) the slot is pinned, and a pinned slot refuses to take
//! a new object.

mod access;
mod index;
mod iter;
#[cfg(feature = "luajit")]
pub mod jit;
mod owned;
pub mod slots;

pub use access::{copy, normalize, with_view};
pub use iter::{push_iterator, NextView};
pub use slots::{Cursor, ViewError};

use crate::fields;
use index::{light_index, METHODS_KEY, TABLES_KEY};
use mlua::{LightUserData, Lua, Value};

/// Installs the metatable of light userdata (object views), the view
/// methods and, with LuaJIT, the FFI views.
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let methods = lua.create_table()?;
    methods.set(
        "copy",
        lua.create_function(|lua, value: Value| copy(lua, &value))?,
    )?;
    lua.set_named_registry_value(METHODS_KEY.to_str().unwrap_or_default(), methods)?;
    let tables = lua.create_function(|lua, (value, key): (Value, mlua::LuaString)| {
        let key = key.to_str()?.to_owned();
        with_view(&value, |obj, part| fields::table(lua, obj, part, &key))
            .map_err(mlua::Error::external)?
    })?;
    lua.set_named_registry_value(TABLES_KEY.to_str().unwrap_or_default(), tables)?;
    let meta = lua.create_table()?;
    // SAFETY: `light_index` follows the Lua C API protocol (see its comments).
    meta.set("__index", unsafe { lua.create_c_function(light_index)? })?;
    meta.set(
        "__tostring",
        lua.create_function(|_, l: LightUserData| {
            Ok(match slots::current(l.0 as usize) {
                Some((obj, part)) => fields::describe(&obj, part),
                None => "dnsluice object (stale)".to_string(),
            })
        })?,
    )?;
    lua.set_type_metatable::<LightUserData>(Some(meta));
    #[cfg(feature = "luajit")]
    jit::install(lua)?;
    Ok(())
}
