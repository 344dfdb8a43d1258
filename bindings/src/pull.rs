//! Pulling from a chain in Lua: the chain's last stage is asked for the next
//! object, which stays in a cursor (and so readable from Lua) until the next
//! call.

use crate::error::located;
use crate::view::{Cursor, NextView, ViewError};
use dnsluice_core::{Producer, StageStats};
use mlua::{LightUserData, Lua};
use std::cell::RefCell;
use std::rc::Rc;

/// A pull chain being read from Lua: the object it lent last stays in the
/// cursor until the next call.
pub struct Pull {
    // Declared before the producer: dropped (emptied) first.
    cursor: Cursor,
    producer: RefCell<Box<dyn Producer>>,
}

impl Pull {
    /// Pulls from `producer`.
    pub fn new(producer: Box<dyn Producer>) -> Result<Rc<Self>, ViewError> {
        Ok(Rc::new(Pull {
            cursor: Cursor::new()?,
            producer: RefCell::new(producer),
        }))
    }

    /// The next object's view, or `None` at the end.
    pub fn next(&self, lua: &Lua) -> mlua::Result<Option<LightUserData>> {
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

impl Pull {
    /// The slot of the cursor the objects are lent through.
    #[cfg_attr(not(feature = "luajit"), allow(dead_code))]
    pub fn slot(&self) -> usize {
        self.cursor.slot()
    }

    /// Makes the next object current: its generation, or `None` at the end.
    #[cfg_attr(not(feature = "luajit"), allow(dead_code))]
    pub fn next_gen(&self) -> Result<Option<u32>, String> {
        self.advance()
            .map(|view| view.map(|l| crate::view::slots::decode(l.0 as usize).1))
    }

    /// The counters of the chain, from its first stage to this one.
    pub fn stats(&self) -> Result<Vec<StageStats>, String> {
        let producer = self
            .producer
            .try_borrow()
            .map_err(|_| "stats: the chain is busy producing".to_string())?;
        let mut stats = Vec::new();
        producer.stats(&mut stats);
        Ok(stats)
    }
}
