//! `filter.lua` in the registry, for TOML pipelines: each stage gets its own
//! Lua state, made from the registry the chain is built from (so its script
//! reaches every module of that registry, whenever it was added).

use crate::error::describe;
use crate::filter_lua::{LuaFilter, FILTER_LUA};
use dnsluice_core::registry::{Factory, ModuleEntry, Parallel, Registry, StageOptions};
use dnsluice_core::{FlatMapStage, StageError};
use dnsluice_options::Options as _;
use mlua::Function;
use std::sync::Arc;

/// Options of `filter.lua`.
#[derive(dnsluice_options::Options)]
struct Options {
    /// The Lua file that defines the function.
    script: std::path::PathBuf,
    /// The global function called with each object; it passes the object
    /// on by returning true.
    function: String,
}

/// The registry entry of `filter.lua` for TOML pipelines.
pub fn filter_lua_entry() -> ModuleEntry {
    let lua_error = |e: mlua::Error| StageError::other(FILTER_LUA, describe(&e));
    let make = move |stage: &StageOptions| -> Result<LuaFilter, StageError> {
        let options: Options = stage.parse()?;
        // A chain built outside a pipeline (no registry): the script sees
        // only filter.lua itself.
        let registry = stage.registry.clone().unwrap_or_else(|| {
            let mut registry = Registry::new();
            registry.add(filter_lua_entry());
            Arc::new(registry)
        });
        let lua = crate::state::new_state(&registry, &[]).map_err(lua_error)?;
        crate::source::exec_file(&lua, &options.script).map_err(lua_error)?;
        let func: Option<Function> = lua
            .globals()
            .get(options.function.as_str())
            .map_err(lua_error)?;
        let func = func.ok_or_else(|| {
            StageError::option(
                FILTER_LUA,
                Some("function"),
                format!(
                    "{} defines no global function `{}`",
                    options.script.display(),
                    options.function
                ),
            )
        })?;
        LuaFilter::new(func, Some(lua)).map_err(|e| StageError::other(FILTER_LUA, e.to_string()))
    };
    let make = Arc::new(make);
    let pull_make = Arc::clone(&make);
    // Built as `ModuleEntry::flat_map` builds one, with constructors that
    // see the whole stage options (the registry with them).
    ModuleEntry {
        name: FILTER_LUA,
        summary: "calls a Lua function for every object; passes on those it returns true for",
        options: Options::docs(),
        check: |table| Options::from_table(table).map(|_| ()),
        factory: Factory::Filter {
            push: Arc::new(move |stage, next| Ok(Box::new(FlatMapStage::new(make(stage)?, next)))),
            pull: Arc::new(move |stage, prev| {
                Ok(Box::new(FlatMapStage::new(pull_make(stage)?, prev)))
            }),
        },
        // A script may keep state (counts, tables) that one copy must see.
        parallel: Parallel::No,
        costly: false,
    }
}
