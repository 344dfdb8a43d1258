//! The slots objects are lent to Lua through, and the views that name them.
//!
//! A view's value (a light userdata's, or the `slot` and `gen` of a LuaJIT
//! FFI view) names a slot and the generation of the object the slot held
//! when the view was made, plus the part of the object it stands for. Every
//! read checks the generation, so a view kept past its object is an error,
//! never a read of freed memory.
//!
//! Each slot has a [`Record`] (the object's fixed fields), filled once per
//! object when a field is first read. The records live in an array per
//! thread that is never freed and never moves, because LuaJIT code reads
//! them through FFI pointers (see `view/jit.lua`); its `gen` is 0 while the
//! slot holds no object, so such a read sees the record is not its object's.

use crate::fields::Part;
use crate::record::Record;
use dnsluice_core::Object;
use mlua::LightUserData;
use std::cell::{Cell, RefCell};
use std::ffi::c_void;

/// Bits of the generation in a view's value.
pub const GEN_BITS: u32 = 32;
/// Bits of the slot number (LuaJIT keeps light userdata under 2^47).
const SLOT_BITS: u32 = 7;
/// Most cursors alive at once in one thread.
pub const MAX_SLOTS: usize = 1 << SLOT_BITS;
/// Set in a view's value when it is the DNS part of the object.
const DNS_BIT: usize = 1 << (GEN_BITS + SLOT_BITS);
/// Set in a view's value when it is the EDNS part of the object.
const EDNS_BIT: usize = DNS_BIT << 1;

/// The message for a view whose object is gone.
pub const STALE: &str =
    "stale object: a view is valid until the next object (use obj:copy() to keep one)";

struct Slot {
    gen: u32,
    used: bool,
    pins: u32,
    /// The object a pull chain put here (a copy: its `Result` is gone).
    obj: Option<Object<'static>>,
    /// The object lent for one call ([`Cursor::lend`]), not copied; null
    /// when none is.
    lent: *const Object<'static>,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            gen: 0,
            used: false,
            pins: 0,
            obj: None,
            lent: std::ptr::null(),
        }
    }
}

impl Slot {
    /// The object the slot holds or is lent, if any.
    fn object(&self) -> Option<&Object<'static>> {
        // SAFETY: `lent` is only non-null during `Cursor::lend`'s call,
        // while the object it points to is borrowed by that call.
        unsafe { self.lent.as_ref() }.or(self.obj.as_ref())
    }

    /// Empties the slot.
    fn empty(&mut self) {
        self.obj = None;
        self.lent = std::ptr::null();
    }
}

thread_local! {
    static SLOTS: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
    static RECORDS: Cell<*mut Record> = const { Cell::new(std::ptr::null_mut()) };
}

/// The records of this thread's slots (`MAX_SLOTS` of them), made on first
/// use and never freed: FFI views may point into them for as long as the
/// thread runs Lua.
pub fn records() -> *mut Record {
    RECORDS.with(|cell| {
        if cell.get().is_null() {
            let array: Box<[Record]> = vec![Record::default(); MAX_SLOTS].into_boxed_slice();
            cell.set(Box::leak(array).as_mut_ptr());
        }
        cell.get()
    })
}

/// The record of `slot` (`slot < MAX_SLOTS`).
fn record(slot: usize) -> *mut Record {
    debug_assert!(slot < MAX_SLOTS);
    // SAFETY: `records()` has MAX_SLOTS elements; slots are below that.
    unsafe { records().add(slot) }
}

/// Marks the record of `slot` as no object's.
fn forget(slot: usize) {
    // SAFETY: the record array is only touched from this thread, and no
    // reference into it is alive across calls.
    unsafe { (*record(slot)).gen = 0 }
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
        records();
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

    /// The slot's number.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Empties the slot: views of its object become stale.
    pub fn clear(&self) -> Result<(), ViewError> {
        SLOTS.with_borrow_mut(|slots| {
            let s = &mut slots[self.slot];
            if s.pins > 0 {
                return Err(ViewError::Pinned);
            }
            s.empty();
            forget(self.slot);
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
            // The one copy of the object on the way to Lua.
            s.obj = Some(*obj);
            s.lent = std::ptr::null();
            Ok(self.next_gen(s))
        })
    }

    /// Moves the slot `s` (this cursor's) to a new generation: its view.
    fn next_gen(&self, s: &mut Slot) -> LightUserData {
        s.gen = s.gen.wrapping_add(1).max(1);
        forget(self.slot);
        LightUserData(encode(self.slot, s.gen, Part::Packet) as *mut c_void)
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
                SLOTS.with_borrow_mut(|slots| slots[self.0.slot].empty());
                forget(self.0.slot);
            }
        }
        // Not copied: the slot points to `obj`, and `Clear` empties it
        // before `obj`'s borrow ends (also on unwind).
        let obj: *const Object<'static> = (obj as *const Object<'_>).cast();
        let view = SLOTS.with_borrow_mut(|slots| {
            let s = &mut slots[self.slot];
            if s.pins > 0 {
                return Err(ViewError::Pinned);
            }
            s.obj = None;
            s.lent = obj;
            Ok(self.next_gen(s))
        })?;
        let _clear = Clear(self);
        Ok(f(view))
    }
}

impl Drop for Cursor {
    fn drop(&mut self) {
        SLOTS.with_borrow_mut(|slots| {
            let s = &mut slots[self.slot];
            s.empty();
            s.used = false;
            s.pins = 0;
        });
        forget(self.slot);
    }
}

/// The value of the view of `part` of the object `gen` of `slot`.
pub fn encode(slot: usize, gen: u32, part: Part) -> usize {
    let bits = match part {
        Part::Packet => 0,
        Part::Dns => DNS_BIT,
        Part::Edns => EDNS_BIT,
    };
    (slot << GEN_BITS) | gen as usize | bits
}

/// The slot, generation and part a view's value names.
pub fn decode(value: usize) -> (usize, u32, Part) {
    let slot = (value >> GEN_BITS) & (MAX_SLOTS - 1);
    let part = if value & EDNS_BIT != 0 {
        Part::Edns
    } else if value & DNS_BIT != 0 {
        Part::Dns
    } else {
        Part::Packet
    };
    (slot, value as u32, part)
}

/// The same view, of another part of its object.
pub fn with_part(value: usize, part: Part) -> usize {
    let (slot, gen, _) = decode(value);
    encode(slot, gen, part)
}

/// Calls `f` with the object of `slot` and its record when the slot holds
/// object `gen` (filling the record first if it is not yet); `None` when the
/// view is stale. `f` must not run Lua code (which could move the slot on).
pub fn with_live<R>(
    slot: usize,
    gen: u32,
    f: impl FnOnce(&Object<'static>, &Record) -> R,
) -> Option<R> {
    SLOTS.with_borrow(|slots| {
        let s = slots.get(slot).filter(|s| s.used && s.gen == gen)?;
        let obj = s.object()?;
        let rec = record(slot);
        // SAFETY: this thread's record array; no other reference into it is
        // alive (every user goes through here or `forget`, neither re-entered).
        unsafe {
            if (*rec).gen != gen {
                *rec = Record::of(obj, gen);
            }
            Some(f(obj, &*rec))
        }
    })
}

/// The object of a live view, copied out of its slot (without pinning it).
pub fn current(value: usize) -> Option<(Object<'static>, Part)> {
    let (slot, gen, part) = decode(value);
    SLOTS.with_borrow(|slots| {
        let s = slots.get(slot).filter(|s| s.used && s.gen == gen)?;
        s.object().map(|&o| (o, part))
    })
}

/// Calls `f` with the object of a live light view, pinned (a pinned slot
/// refuses a new object, so `f` may run Lua code).
pub fn with_pinned<R>(
    value: usize,
    f: impl for<'a> FnOnce(&Object<'a>, Part) -> R,
) -> Result<R, ViewError> {
    let (slot, _, _) = decode(value);
    let (obj, part) = current(value).ok_or(ViewError::Stale)?;
    struct Unpin(usize);
    impl Drop for Unpin {
        fn drop(&mut self) {
            SLOTS.with_borrow_mut(|slots| slots[self.0].pins -= 1);
        }
    }
    SLOTS.with_borrow_mut(|slots| slots[slot].pins += 1);
    let _unpin = Unpin(slot);
    Ok(f(&obj, part))
}
