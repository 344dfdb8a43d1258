//! # dnsluice-lua
//!
//! Lua for dnsluice (mlua, vendored Lua 5.4 by default, or LuaJIT with the
//! `luajit` feature):
//!
//! - [`run_script`]: `dnsluice script FILE.lua [ARGS...]`, with every registry
//!   module reachable as `require("dnsluice.input.mmpcap").new{...}` or
//!   `require("dnsluice").stage("filter.dns", {...})`, wired as in dnsjit
//!   (`b:producer(a)`, `a:receiver(b)`, `input:run()`, `x:produce()`, `x:iter()`,
//!   `x:iter("qname", ...)` for objects with fields, `x:stats()`);
//! - [`register`]: adds `filter.lua` (a Lua function per object) to a registry,
//!   so TOML pipelines can use it;
//! - objects reach Lua as views valid until the next object (`obj:copy()`
//!   keeps one), with fields named as in `output.json` (see `view` and `fields`).

mod error;
mod fields;
mod options;
mod script;
mod stage;
mod view;

pub use error::describe;
pub use script::{new_state, run_script, ScriptError};
pub use stage::{filter_lua_entry, LuaFilter, FILTER_LUA};

use dnsluice_core::Registry;

/// Adds `filter.lua` to `registry`; its scripts can reach the modules
/// `registry` holds now.
pub fn register(registry: &mut Registry) {
    let entry = filter_lua_entry(registry.clone());
    registry.add(entry);
}
