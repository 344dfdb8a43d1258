//! # dnsluice-lua
//!
//! Lua for dnsluice (mlua, vendored LuaJIT by default, or Lua 5.4 with the
//! `lua54` feature and without the default ones):
//!
//! - [`run_script`]: `dnsluice script FILE.lua [ARGS...]`, with every registry
//!   module reachable as `require("dnsluice.input.mmpcap").new{...}` or
//!   `require("dnsluice").stage("filter.dns", {...})`, wired as in dnsjit
//!   (`b:producer(a)`, `a:receiver(b)`, `input:run()`, `x:produce()`, `x:iter()`,
//!   `x:iter("qname", ...)` for objects with fields, `x:stats()`);
//! - [`register`]: adds `filter.lua` (a Lua function per object) to a registry,
//!   so TOML pipelines can use it; its scripts reach the modules of the
//!   registry the pipeline is built from;
//! - objects reach Lua as views valid until the next object (`obj:copy()`
//!   keeps one), with fields named as in `output.json` (see `view` and `fields`).
//!
//! Files, one job each: `state` (a Lua state with the modules), `script`
//! (running a file), `source` (loading one), `modules` (the
//! `require("dnsluice.NAME")` tables), `chain` (stages as Lua holds them and
//! the chains built from them), `pull` (pulling from a chain), `filter_lua`
//! and `entry` (the `filter.lua` stage and its registry entry), `lua_module`
//! (modules written in Lua), `options` (Lua values as TOML options), `view`
//! and `fields` (objects as Lua reads them), `wide` (64-bit integers, exact
//! in both builds), `error` (messages).

#![warn(missing_docs)]

#[cfg(target_os = "linux")]
mod alloc;
mod ascii;
mod chain;
mod entry;
mod error;
mod fields;
mod filter_lua;
mod lua_module;
mod modules;
mod options;
mod pull;
mod record;
mod script;
mod source;
mod state;
#[cfg(feature = "lua54")]
mod strings;
mod view;
mod wide;

pub use entry::filter_lua_entry;
pub use error::describe;
pub use filter_lua::{LuaFilter, FILTER_LUA};
pub use script::{run_script, ScriptError};
pub use state::new_state;

use dnsluice_core::Registry;

/// Adds `filter.lua` to `registry`. Its scripts reach the modules of the
/// registry a pipeline is built from, so modules added before or after this
/// call are all there.
pub fn register(registry: &mut Registry) {
    registry.add(filter_lua_entry());
}
