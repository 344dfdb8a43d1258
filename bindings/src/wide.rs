//! 64-bit integers as Lua gets them, exact in both builds.
//!
//! Lua 5.4 has 64-bit integers: every value is pushed as one. LuaJIT's
//! numbers are doubles, exact up to 2^53 only, so there a value that may be
//! larger is pushed as a LuaJIT 64-bit integer cdata (`int64_t`, or
//! `uint64_t` for counts), made by a Lua function that `view/jit.lua` defines
//! and `view/jit.rs` keeps in the registry under [`BOX_KEY`]:
//!
//! - [`Wide::Always`]: always a cdata (`ts_ns`, nanoseconds since 1970, is
//!   above 2^53 for any date after 15 April 1970, and one type is easier to
//!   write scripts for than two);
//! - [`Wide::Fit`]: a plain number while it is exact (up to 2^53), a cdata
//!   beyond (frame numbers, counts: no run gets near 2^53, but none rounds).

#[cfg(feature = "luajit")]
use mlua::ffi;
use mlua::{Lua, Value};

/// Registry key of `jit.lua`'s `box(hi, lo, unsigned)`: the 64-bit integer
/// cdata `hi * 2^32 + lo` (`hi`, `lo`: 32-bit halves, as numbers).
#[cfg(feature = "luajit")]
pub const BOX_KEY: &std::ffi::CStr = c"dnsluice.jit.box";

/// The largest magnitude a double holds exactly with all integers below it.
#[cfg(feature = "luajit")]
pub const EXACT_IN_DOUBLE: u64 = 1 << 53;

/// How a 64-bit value is handed to a LuaJIT state (Lua 5.4 always gets an
/// integer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wide {
    /// Always as an `int64_t` cdata.
    Always,
    /// As a number while exact, as a cdata beyond 2^53.
    Fit,
}

/// Whether LuaJIT gets `v` as a cdata.
#[cfg(feature = "luajit")]
fn boxed(v: i128, how: Wide) -> bool {
    how == Wide::Always || v.unsigned_abs() > EXACT_IN_DOUBLE.into()
}

/// The 32-bit halves of `v` (two's complement for a negative one) as the
/// numbers `box` takes: `v == hi * 2^32 + lo`.
#[cfg(feature = "luajit")]
fn halves(v: i128) -> (f64, f64) {
    ((v >> 32) as i64 as f64, (v & 0xffff_ffff) as f64)
}

/// `v` as an mlua value (see [`Wide`]).
pub fn value(lua: &Lua, v: i64, how: Wide) -> mlua::Result<Value> {
    make(lua, i128::from(v), how, false)
}

/// A count as an mlua value: as [`Wide::Fit`], a `uint64_t` cdata beyond
/// 2^53 with LuaJIT.
pub fn count(lua: &Lua, n: u64) -> mlua::Result<Value> {
    make(lua, i128::from(n), Wide::Fit, true)
}

/// LuaJIT: a number, or a cdata made by `box`.
#[cfg(feature = "luajit")]
fn make(lua: &Lua, v: i128, how: Wide, unsigned: bool) -> mlua::Result<Value> {
    if !boxed(v, how) {
        return Ok(Value::Number(v as f64));
    }
    let make: mlua::Function = lua.named_registry_value(BOX_KEY.to_str().unwrap_or_default())?;
    let (hi, lo) = halves(v);
    make.call((hi, lo, unsigned))
}

/// Lua 5.4: an integer.
#[cfg(not(feature = "luajit"))]
fn make(_: &Lua, v: i128, _: Wide, _: bool) -> mlua::Result<Value> {
    Ok(match i64::try_from(v) {
        Ok(i) => Value::Integer(i),
        // A count above 2^63: never met, but not wrapped either.
        Err(_) => Value::Number(v as f64),
    })
}

/// Pushes `v` (see [`Wide`]) through the C API.
///
/// # Safety
///
/// `l` is a live state with room for 4 values on its stack. It calls
/// `box`, which raises only when memory runs out.
#[cfg(feature = "luajit")]
pub unsafe fn push(l: *mut ffi::lua_State, v: i64, how: Wide) {
    let v = i128::from(v);
    unsafe {
        if !boxed(v, how) {
            ffi::lua_pushnumber(l, v as f64);
            return;
        }
        let (hi, lo) = halves(v);
        ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, BOX_KEY.as_ptr());
        ffi::lua_pushnumber(l, hi);
        ffi::lua_pushnumber(l, lo);
        ffi::lua_pushboolean(l, 0);
        ffi::lua_call(l, 3, 1);
    }
}

/// Pushes `v` through the C API: a Lua integer.
///
/// # Safety
///
/// `l` is a live state with room for a value on its stack.
#[cfg(not(feature = "luajit"))]
pub unsafe fn push(l: *mut mlua::ffi::lua_State, v: i64, _how: Wide) {
    unsafe { mlua::ffi::lua_pushinteger(l, v) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values whose last digits a double loses, made in each build and
    /// printed by Lua (numbers with `%d`, anything else with `tostring`):
    /// the digits are the literals' (a LuaJIT cdata prints with its `LL` or
    /// `ULL` suffix).
    #[test]
    fn wide_values_and_counts_reach_lua_exactly() {
        let lua = crate::new_state(&dnsluice_core::Registry::default(), &[]).unwrap();
        let show: mlua::Function = lua
            .load(
                "return function(v)\n\
                 if type(v) == 'number' and v == math.floor(v) and math.abs(v) < 2^63 then\n\
                 return string.format('%d', v), 'number' end\n\
                 return tostring(v), type(v) end",
            )
            .eval()
            .unwrap();
        let jit = cfg!(feature = "luajit");
        // (value, Lua 5.4's tostring, LuaJIT's tostring, LuaJIT's type)
        let cases: [(Value, &str, &str, &str); 6] = [
            (
                value(&lua, 1_796_012_540_944_299_114, Wide::Always).unwrap(),
                "1796012540944299114",
                "1796012540944299114LL",
                "cdata",
            ),
            (
                value(&lua, -1_000_000_000_000_000_001, Wide::Always).unwrap(),
                "-1000000000000000001",
                "-1000000000000000001LL",
                "cdata",
            ),
            (value(&lua, 12, Wide::Fit).unwrap(), "12", "12", "number"),
            (
                value(&lua, 9_007_199_254_740_993, Wide::Fit).unwrap(),
                "9007199254740993",
                "9007199254740993LL",
                "cdata",
            ),
            (
                count(&lua, 9_007_199_254_740_992).unwrap(),
                "9007199254740992",
                "9007199254740992",
                "number",
            ),
            (
                count(&lua, 18_446_744_073_709_551_615).unwrap(),
                // Above Lua 5.4's integers: a float, never wrapped.
                "1.844674407371e+19",
                "18446744073709551615ULL",
                "cdata",
            ),
        ];
        for (v, lua54, luajit, jit_type) in cases {
            let (text, ty): (String, String) = show.call(v).unwrap();
            if jit {
                assert_eq!((text.as_str(), ty.as_str()), (luajit, jit_type));
            } else {
                assert_eq!((text.as_str(), ty.as_str()), (lua54, "number"));
            }
        }
    }
}
