//! LuaJIT: views read through the FFI, so that the JIT compiles field reads.
//!
//! `jit.lua` (loaded into every LuaJIT state) declares the [`Record`] struct
//! and gives FFI views a metatype whose `__index` reads the slot's record
//! directly. What it needs from Rust are plain C functions, called through
//! FFI function pointers (no Lua C API, so the JIT compiles the calls):
//! [`fill`] (fill a slot's record for a generation, or say the view is
//! stale), [`text`] (a string field of a live view) and [`next`] (pull the
//! next object through a chain of native stages). None of them calls Lua,
//! and [`next`] is only used for chains with no Lua stage, which is why it
//! may run the chain inside an FFI call.

use super::slots::{encode, records, with_live, MAX_SLOTS, STALE};
use crate::ascii::has_upper;
use crate::fields::{self, Field, Part};
use crate::pull::Pull;
use crate::record::Record;
use mlua::{AnyUserData, LightUserData, Lua, UserData, Value};
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::rc::Rc;

/// Registry key of `jit.lua`'s iterator maker.
const ITERATOR_KEY: &str = "dnsluice.jit.iterator";
/// Registry key of `jit.lua`'s FFI view → light view conversion.
const TO_LIGHT_KEY: &str = "dnsluice.jit.to_light";

/// The string fields [`text`] makes, by number (`T_*` in `jit.lua`).
const TEXT: [(Part, &[u8]); 13] = [
    (Part::Packet, b"src"),
    (Part::Packet, b"dst"),
    (Part::Packet, b"transport"),
    (Part::Packet, b"link"),
    (Part::Packet, b"layer_error"),
    (Part::Packet, b"payload"),
    (Part::Dns, b"qname"),
    (Part::Dns, b"qtype"),
    (Part::Dns, b"qclass"),
    (Part::Dns, b"opcode"),
    (Part::Dns, b"rcode"),
    (Part::Dns, b"error"),
    (Part::Dns, b"bytes"),
];

/// The number of `qname` in [`TEXT`]: [`text`] makes it without looking up its name.
const T_QNAME: u32 = 6;

thread_local! {
    /// Where [`text`] writes the strings it makes; valid until its next call.
    static TEXT_BUFFER: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Fills the record of `slot` for object `gen`: 0, or 1 when the slot no
/// longer holds that object (the view is stale).
extern "C" fn fill(slot: u32, gen: u32) -> i32 {
    match with_live(slot as usize, gen, |_, _| ()) {
        Some(()) => 0,
        None => 1,
    }
}

/// String field `field` (an index in [`TEXT`]) of the view (`slot`, `gen`)
/// of part `part`: its bytes, valid until the next call (Lua copies them at
/// once), and their length in `len`. Null for a field the object does not
/// have (`len` 0), or for a stale view (`len` `usize::MAX`).
///
/// # Safety
///
/// `len` must be valid for a write.
unsafe extern "C" fn text(
    slot: u32,
    gen: u32,
    part: u32,
    field: u32,
    len: *mut usize,
) -> *const u8 {
    let part = match part {
        0 => Part::Packet,
        1 => Part::Dns,
        _ => Part::Edns,
    };
    let name = TEXT
        .get(field as usize)
        .map(|&(_, name)| name)
        .unwrap_or_default();
    let mut scratch = TEXT_BUFFER.take();
    let found = with_live(slot as usize, gen, |obj, rec| {
        let value = if field == T_QNAME && part == Part::Dns {
            fields::qname_of(obj, rec, &mut scratch)
        } else {
            fields::field(obj, rec, part, name, &mut scratch)
        };
        match value {
            // Borrowed from the object (kept until the slot is cleared) or static.
            Field::Str(s) => (s.as_ptr(), s.len()),
            Field::Scratch => (scratch.as_ptr(), scratch.len()),
            _ => (std::ptr::null(), 0),
        }
    });
    // The buffer goes back with its bytes in place; Lua copies them before
    // anything else can write to it.
    TEXT_BUFFER.set(scratch);
    let (ptr, n) = found.unwrap_or((std::ptr::null(), usize::MAX));
    // SAFETY: the caller passes a valid pointer.
    unsafe { *len = n };
    ptr
}

thread_local! {
    /// Where [`lower`] writes a lower-cased string; valid until its next call.
    static LOWER_BUFFER: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// `string.lower` of the `len` bytes at `src` (ASCII, as LuaJIT's own):
/// null when no byte changes (the string is its own lower case), else the
/// lower-cased bytes, valid until the next call (Lua copies them at once).
///
/// # Safety
///
/// `src` must be valid for reads of `len` bytes.
unsafe extern "C" fn lower(src: *const u8, len: usize) -> *const u8 {
    // SAFETY: see above.
    let bytes = unsafe { std::slice::from_raw_parts(src, len) };
    if !has_upper(bytes) {
        return std::ptr::null();
    }
    let first = bytes.iter().position(u8::is_ascii_uppercase).unwrap_or(len);
    let mut out = LOWER_BUFFER.take();
    out.clear();
    out.extend_from_slice(&bytes[..first]);
    out.extend(bytes[first..].iter().map(u8::to_ascii_lowercase));
    let p = out.as_ptr();
    // Back with its bytes in place, read by Lua before anything writes again.
    LOWER_BUFFER.set(out);
    p
}

/// The Rust side of an FFI iterator: the chain, and the error that ended it.
struct JitPull {
    pull: Rc<Pull>,
    error: RefCell<Option<String>>,
}

/// What keeps a [`JitPull`] alive: the iterator's upvalue.
struct Keep(Rc<JitPull>);

impl UserData for Keep {}

/// Pulls the next object of the chain `handle` (a [`JitPull`]) and fills its
/// record: its generation, or 0 at the end or on an error (kept for
/// `raise`).
///
/// # Safety
///
/// `handle` must point to a live [`JitPull`] (`jit.lua` keeps its userdata
/// alive as long as the iterator).
unsafe extern "C" fn next(handle: *const c_void) -> u32 {
    // SAFETY: see above.
    let this = unsafe { &*handle.cast::<JitPull>() };
    let pulled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| this.pull.next_gen()));
    match pulled {
        Ok(Ok(Some(gen))) => {
            with_live(this.pull.slot(), gen, |_, _| ());
            gen
        }
        Ok(Ok(None)) => 0,
        Ok(Err(e)) => {
            *this.error.borrow_mut() = Some(e);
            0
        }
        Err(_) => {
            *this.error.borrow_mut() = Some("a stage panicked".to_string());
            0
        }
    }
}

/// Loads `jit.lua` into `lua` (with the FFI, which scripts then cannot reach).
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let ffi: Value = lua
        .globals()
        .get::<mlua::Table>("package")?
        .get::<mlua::Table>("loaded")?
        .get("ffi")?;
    if ffi.is_nil() {
        return Err(mlua::Error::runtime("LuaJIT's ffi library is not loaded"));
    }
    let light = lua.create_function(|_, (slot, gen, part): (u32, u32, u32)| {
        if slot as usize >= MAX_SLOTS {
            return Err(mlua::Error::runtime("not a view"));
        }
        let part = match part {
            0 => Part::Packet,
            1 => Part::Dns,
            _ => Part::Edns,
        };
        Ok(LightUserData(
            encode(slot as usize, gen, part) as *mut c_void
        ))
    })?;
    let copy = lua.create_function(|lua, view: LightUserData| {
        super::slots::with_pinned(view.0 as usize, |obj, part| {
            super::owned::copy_of(lua, obj, part)
        })
        .map_err(mlua::Error::external)?
    })?;
    let raise = lua.create_function(|lua, keep: AnyUserData| {
        let error = keep.borrow::<Keep>()?.0.error.borrow_mut().take();
        match error {
            Some(e) => Err(crate::error::located(lua, e)),
            None => Ok(()),
        }
    })?;
    let pointer = |p: *mut c_void| Value::LightUserData(LightUserData(p));
    let chunk = lua
        .load(include_str!("jit.lua"))
        .set_name("=dnsluice/jit.lua");
    let (iterator, to_light, boxer): (mlua::Function, mlua::Function, mlua::Function) = chunk
        .call((
            ffi,
            pointer(records().cast()),
            pointer(fill as *mut c_void),
            pointer(text as *mut c_void),
            pointer(next as *mut c_void),
            pointer(lower as *mut c_void),
            light,
            copy,
            raise,
            fields::NAMES,
            STALE,
            std::mem::size_of::<Record>(),
        ))?;
    lua.set_named_registry_value(ITERATOR_KEY, iterator)?;
    lua.set_named_registry_value(TO_LIGHT_KEY, to_light)?;
    lua.set_named_registry_value(crate::wide::BOX_KEY.to_str().unwrap_or_default(), boxer)?;
    // Scripts get what `Lua::new` gives: no FFI and no C modules.
    lua.load(
        "package.loaded.ffi = nil; package.loadlib = nil; package.cpath = ''\n\
         table.remove(package.loaders, 4); table.remove(package.loaders, 3)",
    )
    .exec()
}

/// An FFI iterator over `pull` returning each object's view and the fields
/// `names` (already checked).
pub fn iterator(
    lua: &Lua,
    pull: Rc<Pull>,
    names: &[mlua::LuaString],
) -> mlua::Result<mlua::Function> {
    let slot = pull.slot();
    let state = Rc::new(JitPull {
        pull,
        error: RefCell::new(None),
    });
    let handle = Rc::as_ptr(&state) as *mut c_void;
    let keep = lua.create_userdata(Keep(state))?;
    let make: mlua::Function = lua.named_registry_value(ITERATOR_KEY)?;
    let mut args = vec![
        Value::UserData(keep),
        Value::LightUserData(LightUserData(handle)),
        Value::Integer(slot as mlua::Integer),
    ];
    args.extend(names.iter().map(|n| Value::String(n.clone())));
    make.call(mlua::MultiValue::from_vec(args))
}

/// The light view of the object an FFI view stands for (see
/// [`super::normalize`]).
pub fn to_light(lua: &Lua, value: &Value) -> mlua::Result<Value> {
    let convert: mlua::Function = lua.named_registry_value(TO_LIGHT_KEY)?;
    convert.call(value.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_qname_number_names_the_qname_of_the_dns_part() {
        assert_eq!(TEXT[T_QNAME as usize], (Part::Dns, &b"qname"[..]));
    }
}
