//! Modules written in Lua: a table whose `receive(self, obj)` native stages
//! push to, or whose `produce(self)` they pull from.

use crate::error::{describe, located};
use crate::pull::Pull;
use crate::view::{normalize, with_view, Cursor};
use dnsluice_core::{Object, OwnedObject, Producer, Receiver, StageError, StageStats};
use mlua::{Function, Lua, Table, Value, WeakLua};
use std::cell::RefCell;
use std::rc::Rc;

/// A Lua module that receives objects (`receive(self, obj)`, `finish(self)`).
pub struct LuaReceiver {
    name: String,
    table: Table,
    receive: Function,
    cursor: Cursor,
    downstream: Rc<RefCell<Option<Box<dyn Receiver>>>>,
    count: u64,
}

impl LuaReceiver {
    /// The module `table` (named `name`), pushing to `downstream` with
    /// `self:pass(obj)`.
    pub fn build(
        lua: &Lua,
        name: String,
        table: Table,
        downstream: Option<Box<dyn Receiver>>,
    ) -> mlua::Result<Box<dyn Receiver>> {
        let receive: Option<Function> = table.get("receive")?;
        let Some(receive) = receive else {
            return Err(located(
                lua,
                format!("{name} has no receive(self, obj) function: nothing can push to it"),
            ));
        };
        let downstream = Rc::new(RefCell::new(downstream));
        let to = downstream.clone();
        let pass = lua.create_function(move |lua, (_, view): (Value, Value)| {
            let mut to = to
                .try_borrow_mut()
                .map_err(|_| located(lua, "pass: the next stage is busy (re-entered)"))?;
            let Some(receiver) = to.as_mut() else {
                return Err(located(lua, "pass: this stage has no receiver"));
            };
            let view = normalize(lua, &view)?;
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
pub struct LuaProducer {
    /// The state (weak: the state owns the chain).
    lua: WeakLua,
    name: String,
    table: Table,
    produce: Function,
    owned: OwnedObject,
    count: u64,
}

impl LuaProducer {
    /// The module `table` (named `name`), reading `upstream` with
    /// `self:pull()`.
    pub fn build(
        lua: &Lua,
        name: String,
        table: Table,
        upstream: Option<Box<dyn Producer>>,
    ) -> mlua::Result<Box<dyn Producer>> {
        let produce: Option<Function> = table.get("produce")?;
        let Some(produce) = produce else {
            return Err(located(
                lua,
                format!("{name} has no produce(self) function: it cannot be pulled from"),
            ));
        };
        if let Some(upstream) = upstream {
            let pull = Pull::new(upstream).map_err(|e| located(lua, e))?;
            let next = lua.create_function(move |lua, ()| pull.next(lua))?;
            table.set("pull", next)?;
        }
        Ok(Box::new(LuaProducer {
            lua: lua.weak(),
            name,
            table,
            produce,
            owned: OwnedObject::default(),
            count: 0,
        }))
    }
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
        let lua = self
            .lua
            .try_upgrade()
            .ok_or_else(|| StageError::other(&self.name, "the Lua state is gone"))?;
        let value =
            normalize(&lua, &value).map_err(|e| StageError::other(&self.name, describe(&e)))?;
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
