//! Objects as Lua sees them: views that are valid until the next object.
//!
//! A view is a Lua *light userdata* whose value names a [`Cursor`] slot and the
//! generation of the object the slot held when the view was made (plus a bit
//! for "the DNS part of it"). Making one allocates nothing and leaves nothing
//! for the garbage collector. Every field access checks the generation: a
//! view kept past the next object is a clear Lua error, never a read of freed
//! memory. `obj:copy()` makes an owned copy (a full userdata, [`OwnedView`]).
//!
//! The hot path (`obj.qname`, `obj.dns`, ...) is one C function written
//! against the Lua C API ([`light_index`]): it reads the key, checks the
//! generation, computes the field with [`crate::fields`] and pushes it. Fields
//! that are tables (sections, EDNS, flags) are built by an mlua function.
//! `x:iter(field, ...)` is another C function ([`push_iterator`]): it pulls
//! the next object and pushes its view and the fields named, so a loop that
//! reads a few fields calls into Rust once per object.
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

use crate::fields::{self, Field};
use dnsluice_core::{Object, OwnedObject};
use mlua::{ffi, AnyUserData, LightUserData, Lua, MetaMethod, UserData, UserDataMethods, Value};
use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};
use std::rc::Rc;

/// Bits of the generation in a view's value.
const GEN_BITS: u32 = 32;
/// Bits of the slot number (LuaJIT keeps light userdata under 2^47).
const SLOT_BITS: u32 = 7;
/// Most cursors alive at once in one thread.
pub const MAX_SLOTS: usize = 1 << SLOT_BITS;
/// Set in a view's value when it is the DNS part of the object.
const DNS_BIT: usize = 1 << (GEN_BITS + SLOT_BITS);

/// Registry key of the table of view methods (`copy`, ...).
const METHODS_KEY: &std::ffi::CStr = c"dnsluice.view.methods";
/// Registry key of the function that builds table-valued fields.
const TABLES_KEY: &std::ffi::CStr = c"dnsluice.view.tables";

const STALE: &str =
    "stale object: a view is valid until the next object (use obj:copy() to keep one)";

#[derive(Default)]
struct Slot {
    gen: u32,
    used: bool,
    pins: u32,
    obj: Option<Object<'static>>,
}

thread_local! {
    static SLOTS: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Errors of the view machinery.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The view's object is gone.
    #[error("{STALE}")]
    Stale,
    /// The value is not an object.
    #[error("expected an object, got {0}")]
    NotAnObject(&'static str),
    /// Too many producers and Lua stages alive at once.
    #[error("more than {MAX_SLOTS} object cursors alive at once")]
    TooManyCursors,
    /// The object is being read by a stage that was handed it.
    #[error("the current object is in use by the stage it was passed to")]
    Pinned,
}

/// A slot objects are lent to Lua through. Frees its slot when dropped.
pub struct Cursor {
    slot: usize,
}

impl Cursor {
    /// Takes a free slot.
    pub fn new() -> Result<Self, ViewError> {
        SLOTS.with_borrow_mut(|slots| {
            let slot = match slots.iter().position(|s| !s.used) {
                Some(i) => i,
                None if slots.len() < MAX_SLOTS => {
                    slots.push(Slot::default());
                    slots.len() - 1
                }
                None => return Err(ViewError::TooManyCursors),
            };
            slots[slot].used = true;
            Ok(Cursor { slot })
        })
    }

    /// Empties the slot: views of its object become stale.
    pub fn clear(&self) -> Result<(), ViewError> {
        SLOTS.with_borrow_mut(|slots| {
            let s = &mut slots[self.slot];
            if s.pins > 0 {
                return Err(ViewError::Pinned);
            }
            s.obj = None;
            Ok(())
        })
    }

    /// Puts `obj` in the slot and returns its view.
    ///
    /// # Safety
    ///
    /// The slot must be cleared ([`Cursor::clear`], or dropping the cursor)
    /// before the data `obj` borrows is freed or mutated.
    pub unsafe fn hold(&self, obj: &Object<'_>) -> Result<LightUserData, ViewError> {
        // SAFETY: only the lifetime changes; the caller clears the slot in time.
        let obj: &Object<'static> =
            unsafe { std::mem::transmute::<&Object<'_>, &Object<'static>>(obj) };
        SLOTS.with_borrow_mut(|slots| {
            let s = &mut slots[self.slot];
            if s.pins > 0 {
                return Err(ViewError::Pinned);
            }
            s.gen = s.gen.wrapping_add(1).max(1);
            // The one copy of the object on the way to Lua.
            s.obj = Some(*obj);
            Ok(LightUserData(
                ((self.slot << GEN_BITS) | s.gen as usize) as *mut c_void,
            ))
        })
    }

    /// Lends `obj` to `f` as a view; the view is stale when `f` returns.
    pub fn lend<R>(
        &self,
        obj: &Object<'_>,
        f: impl FnOnce(LightUserData) -> R,
    ) -> Result<R, ViewError> {
        struct Clear<'c>(&'c Cursor);
        impl Drop for Clear<'_> {
            fn drop(&mut self) {
                SLOTS.with_borrow_mut(|slots| slots[self.0.slot].obj = None);
            }
        }
        // SAFETY: `Clear` empties the slot before `obj`'s borrow ends (also on unwind).
        let view = unsafe { self.hold(obj)? };
        let _clear = Clear(self);
        Ok(f(view))
    }
}

impl Drop for Cursor {
    fn drop(&mut self) {
        SLOTS.with_borrow_mut(|slots| {
            let s = &mut slots[self.slot];
            s.obj = None;
            s.used = false;
            s.pins = 0;
        });
    }
}

fn decode(value: usize) -> (usize, u32, bool) {
    let slot = (value >> GEN_BITS) & (MAX_SLOTS - 1);
    (slot, value as u32, value & DNS_BIT != 0)
}

/// The object of a live view, copied out of its slot (without pinning it).
fn current(value: usize) -> Option<(Object<'static>, bool)> {
    let (slot, gen, dns) = decode(value);
    SLOTS.with_borrow(|slots| {
        let s = slots.get(slot).filter(|s| s.used && s.gen == gen)?;
        s.obj.map(|o| (o, dns))
    })
}

/// An owned copy of an object (`obj:copy()`), or its DNS part.
pub struct OwnedView {
    obj: Rc<OwnedObject>,
    dns: bool,
}

impl UserData for OwnedView {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_function(
            MetaMethod::Index,
            |lua, (ud, key): (AnyUserData, mlua::LuaString)| {
                let this = ud.borrow::<OwnedView>()?;
                let obj = this.obj.view();
                let mut scratch = Vec::new();
                let field = fields::field(&obj, this.dns, &key.as_bytes(), &mut scratch);
                match field {
                    Field::Dns => {
                        let dns = OwnedView {
                            obj: this.obj.clone(),
                            dns: true,
                        };
                        drop(this);
                        lua.create_userdata(dns).map(Value::UserData)
                    }
                    Field::Table => fields::table(lua, &obj, this.dns, &key.to_str()?),
                    Field::Unknown => method(lua, &key),
                    other => fields::to_value(lua, other, &scratch),
                }
            },
        );
        methods.add_meta_method(MetaMethod::ToString, |_, this, ()| {
            Ok(fields::describe(&this.obj.view(), this.dns))
        });
    }
}

fn method(lua: &Lua, key: &mlua::LuaString) -> mlua::Result<Value> {
    let methods: mlua::Table =
        lua.named_registry_value(METHODS_KEY.to_str().unwrap_or_default())?;
    match methods.raw_get::<Value>(key)? {
        Value::Nil => Err(mlua::Error::runtime(format!(
            "objects have no field `{}` (fields: {})",
            key.display(),
            fields::NAMES
        ))),
        v => Ok(v),
    }
}

/// Calls `f` with the object a view (light or owned) stands for, pinned.
pub fn with_view<R>(
    value: &Value,
    f: impl for<'a> FnOnce(&Object<'a>, bool) -> R,
) -> Result<R, ViewError> {
    match value {
        Value::LightUserData(l) => {
            let (slot, gen, _) = decode(l.0 as usize);
            let (obj, dns) = current(l.0 as usize).ok_or(ViewError::Stale)?;
            struct Unpin(usize);
            impl Drop for Unpin {
                fn drop(&mut self) {
                    SLOTS.with_borrow_mut(|slots| slots[self.0].pins -= 1);
                }
            }
            SLOTS.with_borrow_mut(|slots| {
                debug_assert_eq!(slots[slot].gen, gen);
                slots[slot].pins += 1
            });
            let _unpin = Unpin(slot);
            Ok(f(&obj, dns))
        }
        Value::UserData(ud) => {
            let this = ud
                .borrow::<OwnedView>()
                .map_err(|_| ViewError::NotAnObject("another userdata"))?;
            Ok(f(&this.obj.view(), this.dns))
        }
        other => Err(ViewError::NotAnObject(other.type_name())),
    }
}

/// Makes an owned copy of the object a view stands for.
pub fn copy(lua: &Lua, value: &Value) -> mlua::Result<AnyUserData> {
    let (owned, dns) = with_view(value, |obj, dns| {
        let mut owned = OwnedObject::default();
        owned.copy_from(obj);
        (owned, dns)
    })
    .map_err(mlua::Error::external)?;
    lua.create_userdata(OwnedView {
        obj: Rc::new(owned),
        dns,
    })
}

/// Installs the metatable of light userdata (object views) and the view methods.
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let methods = lua.create_table()?;
    methods.set(
        "copy",
        lua.create_function(|lua, value: Value| copy(lua, &value))?,
    )?;
    lua.set_named_registry_value(METHODS_KEY.to_str().unwrap_or_default(), methods)?;
    let tables = lua.create_function(|lua, (value, key): (Value, mlua::LuaString)| {
        let key = key.to_str()?.to_owned();
        with_view(&value, |obj, dns| fields::table(lua, obj, dns, &key))
            .map_err(mlua::Error::external)?
    })?;
    lua.set_named_registry_value(TABLES_KEY.to_str().unwrap_or_default(), tables)?;
    let meta = lua.create_table()?;
    // SAFETY: `light_index` follows the Lua C API protocol (see its comments).
    meta.set("__index", unsafe { lua.create_c_function(light_index)? })?;
    meta.set(
        "__tostring",
        lua.create_function(|_, l: LightUserData| {
            Ok(match current(l.0 as usize) {
                Some((obj, dns)) => fields::describe(&obj, dns),
                None => "dnsluice object (stale)".to_string(),
            })
        })?,
    )?;
    lua.set_type_metatable::<LightUserData>(Some(meta));
    Ok(())
}

/// Pushes `msg` for [`ffi::lua_error`].
unsafe fn push_message(l: *mut ffi::lua_State, msg: &str) {
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
unsafe extern "C-unwind" fn light_index(l: *mut ffi::lua_State) -> c_int {
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
        if ffi::lua_type(l, 2) != ffi::LUA_TSTRING || key.is_null() {
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
const PUSHED_TABLE: c_int = 0;
/// [`push_field`]: no such field; nothing was pushed.
const UNKNOWN: c_int = -2;

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
unsafe fn push_field(
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
        let (slot, gen, dns) = decode(value);
        let field = SLOTS.with_borrow(|slots| {
            let s = slots.get(slot).filter(|s| s.used && s.gen == gen)?;
            let obj: &Object<'static> = s.obj.as_ref()?;
            Some(fields::field(obj, dns, key, scratch))
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
            Field::Dns => {
                ffi::lua_pushlightuserdata(l, (value | DNS_BIT) as *mut c_void);
                1
            }
            Field::Table => PUSHED_TABLE,
            Field::Unknown => UNKNOWN,
        }
    }
}

/// Pushes the table-valued field named by the string at stack index `key` of
/// the view `value`, built by the registered table builder (which may raise).
unsafe fn push_table(l: *mut ffi::lua_State, value: usize, key: c_int) {
    unsafe {
        let key = ffi::lua_absindex(l, key);
        ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, TABLES_KEY.as_ptr());
        ffi::lua_pushlightuserdata(l, value as *mut c_void);
        ffi::lua_pushvalue(l, key);
        ffi::lua_call(l, 2, 1);
    }
}

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
            let view = if key.dns { value | DNS_BIT } else { value };
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
