//! The Lua face of the registry: `require("dnsluice.NAME")` tables and
//! their `new{...}` constructors, options checked by name.

use crate::chain::Stage;
use crate::error::located;
use crate::filter_lua::FILTER_LUA;
use dnsluice_core::registry::ModuleEntry;
use mlua::{Function, Lua, Table, Value};

/// The table `require("dnsluice.NAME")` returns for a registry module.
pub fn module_table(lua: &Lua, entry: &ModuleEntry) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("name", entry.name)?;
    t.set("summary", entry.summary)?;
    let names = lua.create_sequence_from(entry.options.iter().map(|o| o.key))?;
    t.set("options", names)?;
    let e = entry.clone();
    t.set(
        "new",
        lua.create_function(move |lua, options: Option<Table>| new_native(lua, &e, options))?,
    )?;
    Ok(t)
}

/// `new{...}` of a registry module.
pub fn new_native(lua: &Lua, entry: &ModuleEntry, options: Option<Table>) -> mlua::Result<Stage> {
    let stage = Stage::native(entry, toml::Table::new());
    if let Some(options) = options {
        for pair in options.pairs::<Value, Value>() {
            let (key, value) = pair?;
            let Value::String(key) = key else {
                return Err(located(
                    lua,
                    format!(
                        "{}: option names are strings, got {}",
                        entry.name,
                        key.type_name()
                    ),
                ));
            };
            stage.set_option(lua, &key.to_str()?, value)?;
        }
    }
    Ok(stage)
}

/// `require("dnsluice.filter.lua").new(...)`: a function, or
/// `{["function"] = f}`, or `{script = "f.lua", ["function"] = "name"}`.
pub fn new_lua_filter(lua: &Lua, spec: Value) -> mlua::Result<Stage> {
    let func = match spec {
        Value::Function(f) => f,
        Value::Table(t) => {
            for pair in t.pairs::<String, Value>() {
                let (key, _) = pair?;
                if key != "function" && key != "script" {
                    return Err(located(
                        lua,
                        format!(
                            "{FILTER_LUA}: unknown option `{key}`; options are: script, function"
                        ),
                    ));
                }
            }
            let script: Option<String> = t.get("script")?;
            match (t.get::<Value>("function")?, script) {
                (Value::Function(f), None) => f,
                (Value::String(name), script) => {
                    if let Some(script) = script {
                        crate::source::exec_file(lua, std::path::Path::new(&script))?;
                    }
                    let name = name.to_str()?.to_owned();
                    lua.globals().get::<Option<Function>>(name.as_str())?.ok_or_else(|| {
                        located(lua, format!("{FILTER_LUA}: no global function `{name}`"))
                    })?
                }
                _ => {
                    return Err(located(
                        lua,
                        format!("{FILTER_LUA}: give a function: new(f), new{{[\"function\"] = f}} or new{{script = \"f.lua\", [\"function\"] = \"name\"}}"),
                    ))
                }
            }
        }
        other => {
            return Err(located(
                lua,
                format!(
                    "{FILTER_LUA}: new() takes a function or a table, got {}",
                    other.type_name()
                ),
            ))
        }
    };
    Ok(Stage::lua_filter(func))
}
