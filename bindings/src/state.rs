//! Lua states with dnsluice's modules: `require("dnsluice")` and
//! `require("dnsluice.MODULE")` for every module of a registry.

use crate::chain::Stage;
use crate::error::located;
use crate::filter_lua::FILTER_LUA;
use crate::modules::{module_table, new_lua_filter, new_native};
use dnsluice_core::Registry;
use mlua::{Lua, Table, Value};

/// A Lua state where `require("dnsluice")` and `require("dnsluice.MODULE")`
/// reach every module of `registry` (and `filter.lua`), with `arg` set to
/// `args` (`args[0]` is the script).
///
/// With Lua 5.4 the collector runs in generational mode: a loop over
/// captures makes a few short-lived strings per object (names, addresses),
/// which a young collection frees without walking what the script keeps
/// (measured: about 6% less CPU for `benches/lua/qname-qtype.lua`).
/// `collectgarbage("incremental")` switches back.
///
/// The state allocates through `alloc.rs`'s allocator (on Linux), which reuses
/// small blocks.
pub fn new_state(registry: &Registry, args: &[String]) -> mlua::Result<Lua> {
    #[cfg(feature = "luajit")]
    // SAFETY: the FFI is for `view/jit.lua` only: it is taken out of
    // `package.loaded` once that has run, so scripts cannot load it.
    let lua = unsafe {
        Lua::unsafe_new_with(
            mlua::StdLib::ALL_SAFE | mlua::StdLib::FFI,
            mlua::LuaOptions::default(),
        )
    };
    #[cfg(not(feature = "luajit"))]
    let lua = Lua::new();
    #[cfg(target_os = "linux")]
    crate::alloc::install(&lua)?;
    #[cfg(feature = "lua54")]
    {
        lua.load("collectgarbage('generational')").exec()?;
        crate::strings::install(&lua)?;
    }
    crate::view::install(&lua)?;
    let arg = lua.create_table()?;
    for (i, a) in args.iter().enumerate() {
        arg.raw_set(i as i64, a.as_str())?;
    }
    lua.globals().set("arg", arg)?;

    let preload: Table = lua.globals().get::<Table>("package")?.get("preload")?;
    let provide = |name: &str, table: Table| -> mlua::Result<()> {
        preload.set(
            name,
            lua.create_function(move |_, _: mlua::MultiValue| Ok(table.clone()))?,
        )
    };
    for entry in registry.iter().filter(|e| e.name != FILTER_LUA) {
        provide(
            &format!("dnsluice.{}", entry.name),
            module_table(&lua, entry)?,
        )?;
    }
    let filter = lua.create_table()?;
    filter.set("name", FILTER_LUA)?;
    if let Some(entry) = registry.get(FILTER_LUA) {
        // The TOML form's options (script, function); new() also takes a function.
        filter.set("summary", entry.summary)?;
        let keys = entry.options.iter().map(|o| o.key);
        filter.set("options", lua.create_sequence_from(keys)?)?;
    }
    filter.set("new", lua.create_function(new_lua_filter)?)?;
    provide(&format!("dnsluice.{FILTER_LUA}"), filter)?;

    let top = lua.create_table()?;
    let reg = registry.clone();
    top.set(
        "stage",
        lua.create_function(move |lua, (name, options): (String, Value)| {
            if name == FILTER_LUA {
                return new_lua_filter(lua, options);
            }
            let entry = reg.get(&name).ok_or_else(|| {
                located(
                    lua,
                    format!(
                        "unknown module `{name}`; modules are: {}, {FILTER_LUA}",
                        reg.names()
                    ),
                )
            })?;
            let options = match options {
                Value::Nil => None,
                Value::Table(t) => Some(t),
                other => {
                    return Err(located(
                        lua,
                        format!("{name}: options are a table, got {}", other.type_name()),
                    ))
                }
            };
            new_native(lua, entry, options)
        })?,
    )?;
    top.set(
        "module",
        lua.create_function(|lua, (table, name): (Value, Option<String>)| match table {
            Value::Table(t) => Ok(Stage::lua_module(
                name.as_deref().unwrap_or("lua module"),
                t,
            )),
            other => Err(located(
                lua,
                format!(
                    "module() takes a table with receive/finish/produce functions, got {}",
                    other.type_name()
                ),
            )),
        })?,
    )?;
    let mut names: Vec<&str> = registry
        .iter()
        .map(|e| e.name)
        .filter(|n| *n != FILTER_LUA)
        .collect();
    names.push(FILTER_LUA);
    top.set("modules", lua.create_sequence_from(names)?)?;
    provide("dnsluice", top)?;
    Ok(lua)
}
