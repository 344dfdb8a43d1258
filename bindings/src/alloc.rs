//! The allocator of dnsluice's Lua states: small blocks are kept for reuse.
//!
//! A loop over captures makes and drops a few small Lua objects per packet
//! (names, lower-cased copies, LuaJIT's FFI views): through mlua's allocator
//! each one is a `malloc` and, when the collector sweeps, a `free`, which
//! the profile shows as a fifth of a natural-style loop's instructions with
//! LuaJIT. This allocator keeps freed blocks of up to [`SMALL`] bytes in
//! per-thread lists by size class and hands them out again.
//!
//! Every block is a `malloc` block, whichever allocator made it, so the
//! states' blocks made before the switch (by mlua's allocator, which calls
//! the same `malloc`) are freed here alike: a block goes to the list of the
//! largest class its usable size covers (`malloc_usable_size`), and a block
//! handed out for `n` bytes comes from a class of at least `n`. What the
//! lists hold is given back to `malloc` when the thread ends; each list
//! keeps at most [`KEEP`] blocks.
//!
//! Out of memory aborts, as with mlua's allocator (which the states were
//! made with: mlua then assumes that memory errors do not happen). mlua no
//! longer counts the states' memory (dnsluice sets no memory limit) and
//! leaves its own 24-byte counter unfreed when a state closes.

use mlua::ffi;
use std::cell::UnsafeCell;
use std::ffi::c_void;

/// The largest block kept for reuse.
const SMALL: usize = 256;
/// The size step between classes.
const GRAIN: usize = 16;
/// Number of classes: class `c` holds blocks of at least `c * GRAIN` bytes.
const CLASSES: usize = SMALL / GRAIN + 1;
/// The most blocks kept per class.
const KEEP: u32 = 1 << 12;

unsafe extern "C" {
    fn malloc(size: usize) -> *mut c_void;
    fn realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
    fn free(ptr: *mut c_void);
    fn malloc_usable_size(ptr: *mut c_void) -> usize;
}

/// Per-thread lists of free blocks, linked through their first word.
struct Lists {
    head: [*mut c_void; CLASSES],
    count: [u32; CLASSES],
}

impl Drop for Lists {
    fn drop(&mut self) {
        for &head in &self.head {
            let mut p = head;
            while !p.is_null() {
                // SAFETY: every listed block is a live `malloc` block whose
                // first word links to the next one.
                unsafe {
                    let next = *p.cast::<*mut c_void>();
                    free(p);
                    p = next;
                }
            }
        }
    }
}

thread_local! {
    static LISTS: UnsafeCell<Lists> = const {
        UnsafeCell::new(Lists {
            head: [std::ptr::null_mut(); CLASSES],
            count: [0; CLASSES],
        })
    };
}

/// Makes `lua` allocate through [`allocate`].
pub fn install(lua: &mlua::Lua) -> mlua::Result<()> {
    // SAFETY: switching allocators is sound because both make and free
    // plain `malloc` blocks (see the module's comment); nothing else runs
    // meanwhile.
    unsafe {
        lua.exec_raw::<()>((), |l| {
            ffi::lua_setallocf(l, allocate, std::ptr::null_mut())
        })
    }
}

/// A block of at least `size` bytes (`size` > 0), aborting when there is none.
fn get(size: usize) -> *mut c_void {
    let p = if size <= SMALL {
        let class = size.div_ceil(GRAIN);
        let listed = LISTS
            .try_with(|lists| {
                // SAFETY: only this thread touches its lists, and nothing
                // here re-enters the allocator.
                let lists = unsafe { &mut *lists.get() };
                let p = lists.head[class];
                if !p.is_null() {
                    // SAFETY: a listed block links to the next one.
                    lists.head[class] = unsafe { *p.cast::<*mut c_void>() };
                    lists.count[class] -= 1;
                }
                p
            })
            .unwrap_or(std::ptr::null_mut());
        if listed.is_null() {
            // SAFETY: plain `malloc`.
            unsafe { malloc(class * GRAIN) }
        } else {
            listed
        }
    } else {
        // SAFETY: plain `malloc`.
        unsafe { malloc(size) }
    };
    if p.is_null() {
        out_of_memory(size);
    }
    p
}

/// Gives back the `malloc` block `p`, whose size Lua knows as `size`.
///
/// # Safety
///
/// `p` must be a live `malloc` block not used afterwards.
unsafe fn put(p: *mut c_void, size: usize) {
    if size <= SMALL {
        // SAFETY: `p` is a live `malloc` block.
        let class = unsafe { malloc_usable_size(p) }.min(SMALL) / GRAIN;
        let kept = class > 0
            && LISTS
                .try_with(|lists| {
                    // SAFETY: as in `get`.
                    let lists = unsafe { &mut *lists.get() };
                    if lists.count[class] >= KEEP {
                        return false;
                    }
                    // SAFETY: the block has room for a pointer (16 bytes or more).
                    unsafe { *p.cast::<*mut c_void>() = lists.head[class] };
                    lists.head[class] = p;
                    lists.count[class] += 1;
                    true
                })
                .unwrap_or(false);
        if kept {
            return;
        }
    }
    // SAFETY: see above.
    unsafe { free(p) }
}

#[cold]
fn out_of_memory(size: usize) -> ! {
    std::alloc::handle_alloc_error(
        std::alloc::Layout::from_size_align(size.max(1), 16)
            .unwrap_or(std::alloc::Layout::new::<u128>()),
    )
}

/// The `lua_Alloc` of dnsluice's states.
///
/// # Safety
///
/// Called by Lua as its allocator: `ptr` is null or a block this function
/// (or mlua's, before [`install`]) returned, of `osize` bytes.
pub unsafe extern "C" fn allocate(
    _ud: *mut c_void,
    ptr: *mut c_void,
    osize: usize,
    nsize: usize,
) -> *mut c_void {
    if nsize == 0 {
        if !ptr.is_null() {
            // SAFETY: Lua frees a block it had.
            unsafe { put(ptr, osize) };
        }
        return std::ptr::null_mut();
    }
    if nsize > isize::MAX as usize {
        return std::ptr::null_mut();
    }
    if ptr.is_null() {
        return get(nsize);
    }
    if osize > SMALL && nsize > SMALL {
        // SAFETY: a live `malloc` block.
        let p = unsafe { realloc(ptr, nsize) };
        if p.is_null() {
            out_of_memory(nsize);
        }
        return p;
    }
    let p = get(nsize);
    // SAFETY: both blocks are live and distinct; `osize` bytes of the old
    // one are Lua's.
    unsafe {
        std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), p.cast::<u8>(), osize.min(nsize));
        put(ptr, osize);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::null_mut;

    /// `allocate` as Lua calls it.
    fn lua_alloc(ptr: *mut c_void, osize: usize, nsize: usize) -> *mut c_void {
        // SAFETY: the tests pass blocks this allocator (or `malloc`) made.
        unsafe { allocate(null_mut(), ptr, osize, nsize) }
    }

    #[test]
    fn a_freed_small_block_is_handed_out_again_for_its_class_only() {
        // A thread of its own: its lists start empty.
        std::thread::spawn(|| {
            let a = lua_alloc(null_mut(), 0, 24);
            lua_alloc(a, 24, 0);
            // 17 to 32 bytes: the same class.
            let b = lua_alloc(null_mut(), 0, 20);
            assert_eq!(b, a);
            // Grown past its class: a new block; the old one is listed again.
            let c = lua_alloc(b, 20, 100);
            assert_ne!(c, b);
            assert_eq!(lua_alloc(null_mut(), 0, 32), b);
            // A block `malloc` made for 20 bytes (as mlua's allocator did
            // before ours) has less than 32: listed for 16-byte requests only.
            // SAFETY: plain `malloc`.
            let m = unsafe { malloc(20) };
            lua_alloc(m, 20, 0);
            let d = lua_alloc(null_mut(), 0, 20);
            assert_ne!(d, m);
            assert_eq!(lua_alloc(null_mut(), 0, 16), m);
            // Large blocks are not listed.
            let big = lua_alloc(null_mut(), 0, 4096);
            let bigger = lua_alloc(big, 4096, 8192);
            lua_alloc(bigger, 8192, 0);
            for (p, n) in [(b, 32), (c, 100), (d, 20), (m, 16)] {
                lua_alloc(p, n, 0);
            }
        })
        .join()
        .unwrap();
    }
}
