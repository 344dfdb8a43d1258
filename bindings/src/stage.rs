//! Stages in Lua: registry modules, `filter.lua`, and modules written in Lua,
//! wired as in dnsjit (`b:producer(a)`, `a:receiver(b)`) and built into a
//! chain of native stages when it is driven (`run`, `produce`, `iter`).

use crate::error::{describe, located};
use crate::view::{push_iterator, with_view, Cursor, NextView};
use dnsluice_core::registry::{Factory, ModuleEntry, Registry, StageOptions};
use dnsluice_core::{
    drive, FlatMap, FlatMapStage, Object, OwnedObject, Producer, Receiver, StageError, StageStats,
};
use mlua::{
    AnyUserData, Function, LightUserData, Lua, MetaMethod, Table, UserData, UserDataMethods, Value,
    Variadic,
};
use std::cell::RefCell;
use std::rc::Rc;

/// Name of the Lua-calling filter in the registry and in Lua.
pub const FILTER_LUA: &str = "filter.lua";

/// A pull chain being read from Lua: the object it lent last stays in the
/// cursor until the next call.
pub struct Pull {
    // Declared before the producer: dropped (emptied) first.
    cursor: Cursor,
    producer: RefCell<Box<dyn Producer>>,
}

impl Pull {
    fn new(producer: Box<dyn Producer>) -> Result<Rc<Self>, crate::view::ViewError> {
        Ok(Rc::new(Pull {
            cursor: Cursor::new()?,
            producer: RefCell::new(producer),
        }))
    }

    /// The next object's view, or `None` at the end.
    fn next(&self, lua: &Lua) -> mlua::Result<Option<LightUserData>> {
        self.advance().map_err(|e| located(lua, e))
    }

    fn advance(&self) -> Result<Option<LightUserData>, String> {
        self.cursor.clear().map_err(|e| e.to_string())?;
        let mut producer = self
            .producer
            .try_borrow_mut()
            .map_err(|_| "a stage pulled from itself".to_string())?;
        // Matched in place: moving the object out of the `Result` would copy it.
        match &producer.produce() {
            // SAFETY: the object borrows from `producer`, which is only touched
            // again by `advance` (which empties the cursor first) or dropped
            // after the cursor (field order).
            Ok(Some(obj)) => unsafe { self.cursor.hold(obj) }
                .map(Some)
                .map_err(|e| e.to_string()),
            Ok(None) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl NextView for Pull {
    fn next_view(&self) -> Result<Option<usize>, String> {
        self.advance().map(|view| view.map(|l| l.0 as usize))
    }
}

/// How a stage is made.
enum Kind {
    /// A registry module and its options.
    Native {
        entry: ModuleEntry,
        options: toml::Table,
    },
    /// `filter.lua` with a function of this state.
    LuaFilter { func: Function },
    /// A module written in Lua: a table with `receive`/`finish` and/or `produce`.
    LuaModule { table: Table },
}

/// A stage's [`Kind`] with what building it needs, owned.
enum Builder {
    /// A registry module's constructors.
    Native(Factory),
    /// `filter.lua`'s function.
    LuaFilter(Function),
    /// A Lua module's table.
    LuaModule(Table),
}

struct Node {
    name: String,
    kind: Kind,
    upstream: Option<Stage>,
    downstream: Option<Stage>,
    pull: Option<Rc<Pull>>,
    /// The counters of the chain this stage ran (`x:run()`), once it is done.
    ran: Option<Vec<StageStats>>,
    used: bool,
}

/// A stage as Lua holds it (userdata).
#[derive(Clone)]
pub struct Stage(Rc<RefCell<Node>>);

impl Stage {
    fn new(name: &str, kind: Kind) -> Self {
        Stage(Rc::new(RefCell::new(Node {
            name: name.to_string(),
            kind,
            upstream: None,
            downstream: None,
            pull: None,
            ran: None,
            used: false,
        })))
    }

    /// A registry module with `options` (already checked by name).
    pub fn native(entry: &ModuleEntry, options: toml::Table) -> Self {
        Stage::new(
            entry.name,
            Kind::Native {
                entry: entry.clone(),
                options,
            },
        )
    }

    /// `filter.lua` calling `func` for every object.
    pub fn lua_filter(func: Function) -> Self {
        Stage::new(FILTER_LUA, Kind::LuaFilter { func })
    }

    /// A module written in Lua.
    pub fn lua_module(name: &str, table: Table) -> Self {
        Stage::new(name, Kind::LuaModule { table })
    }

    fn name(&self) -> String {
        self.0.borrow().name.clone()
    }

    /// Marks the stage as built into a chain (a stage is used once).
    fn claim(&self, lua: &Lua) -> mlua::Result<()> {
        let mut node = self.0.borrow_mut();
        if node.used {
            return Err(located(
                lua,
                format!("{} is already part of a chain that was built", node.name),
            ));
        }
        node.used = true;
        Ok(())
    }

    fn upstream(&self, lua: &Lua) -> mlua::Result<Stage> {
        let node = self.0.borrow();
        node.upstream.clone().ok_or_else(|| {
            located(
                lua,
                format!(
                    "{} has nothing to pull from: give it one with :producer(stage)",
                    node.name
                ),
            )
        })
    }

    fn downstream(&self, lua: &Lua) -> mlua::Result<Stage> {
        let node = self.0.borrow();
        node.downstream.clone().ok_or_else(|| {
            located(
                lua,
                format!(
                    "{} has nothing to push to: give it one with :receiver(stage)",
                    node.name
                ),
            )
        })
    }

    fn options(&self) -> Option<StageOptions> {
        match &self.0.borrow().kind {
            Kind::Native { entry, options } => Some(StageOptions::new(entry.name, options.clone())),
            _ => None,
        }
    }

    /// What building this stage starts from (cloned out of the node, so the
    /// node is not borrowed while its neighbours are built).
    fn builder(&self) -> Builder {
        match &self.0.borrow().kind {
            Kind::Native { entry, .. } => Builder::Native(entry.factory.clone()),
            Kind::LuaFilter { func } => Builder::LuaFilter(func.clone()),
            Kind::LuaModule { table } => Builder::LuaModule(table.clone()),
        }
    }

    /// Builds this stage (and what it pulls from) as a producer.
    fn producer(&self, lua: &Lua) -> mlua::Result<Box<dyn Producer>> {
        self.claim(lua)?;
        let name = self.name();
        match self.builder() {
            Builder::Native(Factory::Input(make)) => {
                make(&self.options().unwrap_or_default()).map_err(|e| located(lua, e))
            }
            Builder::Native(Factory::Filter { pull, .. }) => {
                let upstream = self.upstream(lua)?.producer(lua)?;
                pull(&self.options().unwrap_or_default(), upstream).map_err(|e| located(lua, e))
            }
            Builder::Native(Factory::Output(_)) => Err(located(
                lua,
                format!("{name} is an output: it receives objects, nothing can pull from it"),
            )),
            Builder::Native(Factory::Split(_)) => Err(located(lua, split_in_lua(&name))),
            Builder::LuaFilter(func) => {
                let upstream = self.upstream(lua)?.producer(lua)?;
                let filter = LuaFilter::new(func, None).map_err(|e| located(lua, e))?;
                Ok(Box::new(FlatMapStage::new(filter, upstream)))
            }
            Builder::LuaModule(table) => {
                let produce: Option<Function> = table.get("produce")?;
                let Some(produce) = produce else {
                    return Err(located(
                        lua,
                        format!("{name} has no produce(self) function: it cannot be pulled from"),
                    ));
                };
                let upstream = self.0.borrow().upstream.clone();
                if let Some(upstream) = upstream {
                    let pull = Pull::new(upstream.producer(lua)?).map_err(|e| located(lua, e))?;
                    let next = lua.create_function(move |lua, ()| pull.next(lua))?;
                    table.set("pull", next)?;
                }
                Ok(Box::new(LuaProducer {
                    name,
                    table,
                    produce,
                    owned: OwnedObject::default(),
                    count: 0,
                }))
            }
        }
    }

    /// Builds this stage (and what it pushes to) as a receiver.
    fn receiver(&self, lua: &Lua) -> mlua::Result<Box<dyn Receiver>> {
        self.claim(lua)?;
        let name = self.name();
        match self.builder() {
            Builder::Native(Factory::Output(make)) => {
                make(&self.options().unwrap_or_default()).map_err(|e| located(lua, e))
            }
            Builder::Native(Factory::Filter { push, .. }) => {
                let downstream = self.downstream(lua)?.receiver(lua)?;
                push(&self.options().unwrap_or_default(), downstream).map_err(|e| located(lua, e))
            }
            Builder::Native(Factory::Input(_)) => Err(located(
                lua,
                format!("{name} is an input: it produces objects, nothing can push to it"),
            )),
            Builder::Native(Factory::Split(_)) => Err(located(lua, split_in_lua(&name))),
            Builder::LuaFilter(func) => {
                let downstream = self.downstream(lua)?.receiver(lua)?;
                let filter = LuaFilter::new(func, None).map_err(|e| located(lua, e))?;
                Ok(Box::new(FlatMapStage::new(filter, downstream)))
            }
            Builder::LuaModule(table) => {
                let receive: Option<Function> = table.get("receive")?;
                let Some(receive) = receive else {
                    return Err(located(
                        lua,
                        format!(
                            "{name} has no receive(self, obj) function: nothing can push to it"
                        ),
                    ));
                };
                let next = self.0.borrow().downstream.clone();
                let downstream = Rc::new(RefCell::new(match next {
                    Some(next) => Some(next.receiver(lua)?),
                    None => None,
                }));
                let to = downstream.clone();
                let pass = lua.create_function(move |lua, (_, view): (Value, Value)| {
                    let mut to = to
                        .try_borrow_mut()
                        .map_err(|_| located(lua, "pass: the next stage is busy (re-entered)"))?;
                    let Some(receiver) = to.as_mut() else {
                        return Err(located(lua, "pass: this stage has no receiver"));
                    };
                    with_view(&view, |obj, _| {
                        let mut obj = *obj;
                        receiver.receive(&mut obj)
                    })
                    .map_err(|e| located(lua, e))?
                    .map_err(|e| located(lua, e))
                })?;
                table.set("pass", pass)?;
                Ok(Box::new(LuaReceiver {
                    name,
                    table,
                    receive,
                    cursor: Cursor::new().map_err(|e| located(lua, e))?,
                    downstream,
                    count: 0,
                }))
            }
        }
    }

    /// `x:run()`: drives the push chain this stage is part of to its end.
    fn run(&self, lua: &Lua) -> mlua::Result<u64> {
        let upstream = self.0.borrow().upstream.clone();
        let (mut producer, mut receiver) = match upstream {
            // The stage pulls from its producer and pushes what it makes on.
            Some(up) => {
                let receiver = self.receiver(lua)?;
                (up.producer(lua)?, receiver)
            }
            None => {
                let receiver = self.downstream(lua)?.receiver(lua)?;
                (self.producer(lua)?, receiver)
            }
        };
        let moved = drive(&mut producer, &mut receiver, None).map_err(|e| located(lua, e))?;
        let mut stats = Vec::new();
        producer.stats(&mut stats);
        receiver.stats(&mut stats);
        self.0.borrow_mut().ran = Some(stats);
        Ok(moved)
    }

    /// `x:stats()`: the counters of the chain `x` drives, one table per
    /// stage from the first to the last: live for a stage being pulled from
    /// (`iter`, `produce`), final after `run`.
    fn stats(&self, lua: &Lua) -> mlua::Result<Table> {
        let node = self.0.borrow();
        let stats = match (&node.pull, &node.ran) {
            (Some(pull), _) => {
                let producer = pull
                    .producer
                    .try_borrow()
                    .map_err(|_| located(lua, "stats: the chain is busy producing"))?;
                let mut stats = Vec::new();
                producer.stats(&mut stats);
                stats
            }
            (None, Some(ran)) => ran.clone(),
            (None, None) => {
                return Err(located(
                    lua,
                    format!(
                        "{}: no counters yet: ask the stage you pulled from (iter, produce) or ran",
                        node.name
                    ),
                ))
            }
        };
        stats_table(lua, &stats)
    }

    fn pull(&self, lua: &Lua) -> mlua::Result<Rc<Pull>> {
        if let Some(pull) = &self.0.borrow().pull {
            return Ok(pull.clone());
        }
        let pull = Pull::new(self.producer(lua)?).map_err(|e| located(lua, e))?;
        self.0.borrow_mut().pull = Some(pull.clone());
        Ok(pull)
    }

    fn set_option(&self, lua: &Lua, key: &str, value: Value) -> mlua::Result<()> {
        let mut node = self.0.borrow_mut();
        if node.used {
            return Err(located(
                lua,
                format!(
                    "{}: options cannot change once the chain is built",
                    node.name
                ),
            ));
        }
        match &mut node.kind {
            Kind::Native { entry, options } => {
                check_option(entry, key).map_err(|e| located(lua, e))?;
                match crate::options::to_toml(&value)
                    .map_err(|e| located(lua, format!("{}: option `{key}`: {e}", entry.name)))?
                {
                    Some(v) => options.insert(key.to_string(), v),
                    None => options.remove(key),
                };
                Ok(())
            }
            _ => Err(located(lua, format!("{} has no options to set", node.name))),
        }
    }
}

/// The counters of a chain as a Lua list: per stage `{module, input, output,
/// errors = {kind = n}, counters = {name = n}, warnings = {...}}`.
fn stats_table(lua: &Lua, stats: &[StageStats]) -> mlua::Result<Table> {
    let list = lua.create_table()?;
    for stage in stats {
        let t = lua.create_table()?;
        t.set("module", stage.module.as_str())?;
        t.set("input", stage.input)?;
        t.set("output", stage.output)?;
        let map = |m: &std::collections::BTreeMap<String, u64>| {
            lua.create_table_from(m.iter().map(|(k, v)| (k.as_str(), *v)))
        };
        t.set("errors", map(&stage.errors)?)?;
        t.set("counters", map(&stage.counters)?)?;
        t.set(
            "warnings",
            lua.create_sequence_from(stage.warnings.iter().map(String::as_str))?,
        )?;
        list.push(t)?;
    }
    Ok(list)
}

/// Checks that `key` is an option of `entry`.
pub fn check_option(entry: &ModuleEntry, key: &str) -> Result<(), String> {
    if entry.options.iter().any(|o| o.key == key) {
        return Ok(());
    }
    let valid: Vec<&str> = entry.options.iter().map(|o| o.key).collect();
    Err(if valid.is_empty() {
        format!(
            "{}: unknown option `{key}` ({} has no options)",
            entry.name, entry.name
        )
    } else {
        format!(
            "{}: unknown option `{key}`; options are: {}",
            entry.name,
            valid.join(", ")
        )
    })
}

fn link(lua: &Lua, up: &Stage, down: &Stage) -> mlua::Result<()> {
    if Rc::ptr_eq(&up.0, &down.0) {
        return Err(located(lua, "a stage cannot be linked to itself"));
    }
    up.0.borrow_mut().downstream = Some(down.clone());
    down.0.borrow_mut().upstream = Some(up.clone());
    Ok(())
}

impl UserData for Stage {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("producer", |lua, this, up: AnyUserData| {
            let up = up.borrow::<Stage>()?.clone();
            link(lua, &up, this)?;
            Ok(this.clone())
        });
        methods.add_method("receiver", |lua, this, down: AnyUserData| {
            let down = down.borrow::<Stage>()?.clone();
            link(lua, this, &down)?;
            Ok(down)
        });
        methods.add_method("run", |lua, this, ()| this.run(lua));
        methods.add_method("produce", |lua, this, ()| this.pull(lua)?.next(lua));
        // `for obj in x:iter()`, or `for obj, a, b in x:iter("a", "b")`: the
        // named fields (the object's or its DNS part's) come with each object.
        methods.add_method("iter", |lua, this, names: Variadic<mlua::LuaString>| {
            let keys = names
                .iter()
                .map(|name| {
                    crate::fields::resolve(&name.as_bytes()).ok_or_else(|| {
                        located(
                            lua,
                            format!(
                                "iter: objects have no field `{}` (fields: {})",
                                name.display(),
                                crate::fields::NAMES
                            ),
                        )
                    })
                })
                .collect::<mlua::Result<Vec<_>>>()?;
            push_iterator(lua, this.pull(lua)?, keys)
        });
        methods.add_method("set", |lua, this, (key, value): (String, Value)| {
            this.set_option(lua, &key, value)?;
            Ok(this.clone())
        });
        methods.add_method("open", |lua, this, path: Value| {
            this.set_option(lua, "path", path)?;
            Ok(this.clone())
        });
        methods.add_method("stats", |lua, this, ()| this.stats(lua));
        methods.add_method("name", |_, this, ()| Ok(this.name()));
        methods.add_meta_method(MetaMethod::ToString, |_, this, ()| {
            Ok(format!("dnsluice stage {}", this.name()))
        });
        // Unknown keys: an option setter (`input:path("x.pcap")`) or an error.
        methods.add_meta_function(
            MetaMethod::Index,
            |lua, (ud, key): (AnyUserData, String)| {
                let this = ud.borrow::<Stage>()?.clone();
                if let Kind::Native { entry, .. } = &this.0.borrow().kind {
                    check_option(entry, &key).map_err(|e| located(lua, e))?;
                } else {
                    return Err(located(lua, format!("{}: no method `{key}`", this.name())));
                }
                lua.create_function(move |lua, (ud, value): (AnyUserData, Value)| {
                    ud.borrow::<Stage>()?.set_option(lua, &key, value)?;
                    Ok(ud)
                })
            },
        );
    }
}

/// `filter.lua`: calls a Lua function for every object and passes on those
/// for which it returns true.
pub struct LuaFilter {
    func: Function,
    cursor: Cursor,
    passed: u64,
    // A state made for a TOML stage lives as long as the stage.
    _lua: Option<Lua>,
}

impl LuaFilter {
    /// Calls `func`; `lua` is the state it belongs to when the filter owns it.
    pub fn new(func: Function, lua: Option<Lua>) -> Result<Self, crate::view::ViewError> {
        Ok(LuaFilter {
            func,
            cursor: Cursor::new()?,
            passed: 0,
            _lua: lua,
        })
    }
}

impl FlatMap for LuaFilter {
    fn process<R: Receiver + ?Sized>(
        &mut self,
        obj: &mut Object<'_>,
        out: &mut R,
    ) -> Result<(), StageError> {
        let keep = self
            .cursor
            .lend(obj, |view| self.func.call::<Value>(view))
            .map_err(|e| StageError::other(FILTER_LUA, e.to_string()))?
            .map_err(|e| StageError::other(FILTER_LUA, describe(&e)))?;
        if !matches!(keep, Value::Nil | Value::Boolean(false)) {
            self.passed += 1;
            out.receive(obj)?;
        }
        Ok(())
    }

    fn stats(&self) -> StageStats {
        let mut stats = StageStats::new(FILTER_LUA);
        stats.output = self.passed;
        stats
    }
}

/// A Lua module that receives objects (`receive(self, obj)`, `finish(self)`).
struct LuaReceiver {
    name: String,
    table: Table,
    receive: Function,
    cursor: Cursor,
    downstream: Rc<RefCell<Option<Box<dyn Receiver>>>>,
    count: u64,
}

impl Receiver for LuaReceiver {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        self.count += 1;
        self.cursor
            .lend(obj, |view| self.receive.call::<()>((&self.table, view)))
            .map_err(|e| StageError::other(&self.name, e.to_string()))?
            .map_err(|e| StageError::other(&self.name, describe(&e)))
    }

    fn finish(&mut self) -> Result<(), StageError> {
        let finish: Option<Function> = self
            .table
            .get("finish")
            .map_err(|e| StageError::other(&self.name, describe(&e)))?;
        if let Some(finish) = finish {
            finish
                .call::<()>(&self.table)
                .map_err(|e| StageError::other(&self.name, describe(&e)))?;
        }
        match self.downstream.try_borrow_mut() {
            Ok(mut next) => match next.as_mut() {
                Some(next) => next.finish(),
                None => Ok(()),
            },
            Err(_) => Err(StageError::other(
                &self.name,
                "finished while passing an object",
            )),
        }
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new(&self.name);
        stats.input = self.count;
        out.push(stats);
        if let Ok(next) = self.downstream.try_borrow() {
            if let Some(next) = next.as_ref() {
                next.stats(out);
            }
        }
    }
}

/// A Lua module that produces objects (`produce(self)`); what it returns is
/// copied, so native stages may keep it until they ask for the next.
struct LuaProducer {
    name: String,
    table: Table,
    produce: Function,
    owned: OwnedObject,
    count: u64,
}

impl Producer for LuaProducer {
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        let value: Value = self
            .produce
            .call(&self.table)
            .map_err(|e| StageError::other(&self.name, describe(&e)))?;
        if value.is_nil() {
            return Ok(None);
        }
        let owned = &mut self.owned;
        with_view(&value, |obj, _| owned.copy_from(obj))
            .map_err(|e| StageError::other(&self.name, format!("produce returned {e}")))?;
        self.count += 1;
        Ok(Some(self.owned.view()))
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new(&self.name);
        stats.output = self.count;
        out.push(stats);
    }
}

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
                        crate::script::exec_file(lua, std::path::Path::new(&script))?;
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

/// The registry entry of `filter.lua` for TOML pipelines: each stage gets its
/// own Lua state, with the modules of `registry` reachable from the script.
pub fn filter_lua_entry(registry: Registry) -> ModuleEntry {
    /// Options of `filter.lua`.
    #[derive(dnsluice_options::Options)]
    struct Options {
        /// The Lua file that defines the function.
        script: std::path::PathBuf,
        /// The global function called with each object; it passes the object
        /// on by returning true.
        function: String,
    }
    let registry = std::sync::Arc::new(registry);
    let make = move |options: Options| -> Result<LuaFilter, StageError> {
        let lua = crate::script::new_state(&registry, &[])
            .map_err(|e| StageError::other(FILTER_LUA, describe(&e)))?;
        crate::script::exec_file(&lua, &options.script)
            .map_err(|e| StageError::other(FILTER_LUA, describe(&e)))?;
        let func: Option<Function> = lua
            .globals()
            .get(options.function.as_str())
            .map_err(|e| StageError::other(FILTER_LUA, describe(&e)))?;
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
    ModuleEntry::flat_map(
        FILTER_LUA,
        "calls a Lua function for every object; passes on those it returns true for",
        make,
    )
}

/// Why a split stage cannot be used from Lua.
fn split_in_lua(name: &str) -> String {
    format!("{name} runs the rest of a chain in threads, which only TOML pipelines can build (Lua states stay on one thread)")
}
