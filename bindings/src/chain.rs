//! Stages as Lua holds them, wired as in dnsjit (`b:producer(a)`,
//! `a:receiver(b)`), and built into a chain of native stages when the chain
//! is driven (`run`, `produce`, `iter`).

use crate::error::located;
use crate::filter_lua::{LuaFilter, FILTER_LUA};
use crate::lua_module::{LuaProducer, LuaReceiver};
use crate::pull::Pull;
use crate::view::push_iterator;
use crate::wide::count;
use dnsluice_core::registry::{Factory, ModuleEntry, StageOptions};
use dnsluice_core::{drive, FlatMapStage, Producer, Receiver, StageStats};
use mlua::{
    AnyUserData, Function, Lua, MetaMethod, Table, UserData, UserDataMethods, Value, Variadic,
};
use std::cell::RefCell;
use std::rc::Rc;

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

    /// Whether this stage and all it pulls from are registry modules.
    fn is_native_chain(&self) -> bool {
        let mut stage = Some(self.clone());
        while let Some(s) = stage {
            let node = s.0.borrow();
            if !matches!(node.kind, Kind::Native { .. }) {
                return false;
            }
            stage = node.upstream.clone();
        }
        true
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
                let upstream = self.0.borrow().upstream.clone();
                let upstream = match upstream {
                    Some(upstream) => Some(upstream.producer(lua)?),
                    None => None,
                };
                LuaProducer::build(lua, name, table, upstream)
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
                let next = self.0.borrow().downstream.clone();
                let downstream = match next {
                    Some(next) => Some(next.receiver(lua)?),
                    None => None,
                };
                LuaReceiver::build(lua, name, table, downstream)
            }
        }
    }

    /// `x:run()`: drives the push chain this stage is part of to its end;
    /// the number of objects the first stage made (exact, see `wide`).
    fn run(&self, lua: &Lua) -> mlua::Result<Value> {
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
        count(lua, moved)
    }

    /// `x:stats()`: the counters of the chain `x` drives, one table per
    /// stage from the first to the last: live for a stage being pulled from
    /// (`iter`, `produce`), final after `run`.
    fn stats(&self, lua: &Lua) -> mlua::Result<Table> {
        let node = self.0.borrow();
        let stats = match (&node.pull, &node.ran) {
            (Some(pull), _) => pull.stats().map_err(|e| located(lua, e))?,
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

    /// Sets option `key` of a registry module (before the chain is built).
    pub fn set_option(&self, lua: &Lua, key: &str, value: Value) -> mlua::Result<()> {
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
        t.set("input", count(lua, stage.input)?)?;
        t.set("output", count(lua, stage.output)?)?;
        let map = |m: &std::collections::BTreeMap<String, u64>| -> mlua::Result<Table> {
            let t = lua.create_table()?;
            for (k, v) in m {
                t.set(k.as_str(), count(lua, *v)?)?;
            }
            Ok(t)
        };
        t.set("errors", map(&stage.errors)?)?;
        t.set("counters", map(&stage.counters)?)?;
        t.set(
            "warnings",
            lua.create_sequence_from(stage.warning_lines().map(String::as_str))?,
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
            let native = this.is_native_chain();
            let pull = this.pull(lua)?;
            // With LuaJIT, a chain of native stages is read through FFI
            // views, which the JIT compiles; Lua stages in the chain would
            // call Lua from inside the FFI call, which LuaJIT forbids.
            #[cfg(feature = "luajit")]
            if native {
                return crate::view::jit::iterator(lua, pull, &names);
            }
            let _ = native;
            push_iterator(lua, pull, keys)
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

/// Why a split stage cannot be used from Lua.
fn split_in_lua(name: &str) -> String {
    format!("{name} runs the rest of a chain in threads, which only TOML pipelines can build (Lua states stay on one thread)")
}
