//! Owned copies of objects (`obj:copy()`): full userdata that keep their
//! object for as long as Lua holds them.

use crate::fields::{self, Field, Part};
use crate::record::Record;
use dnsluice_core::OwnedObject;
use mlua::{AnyUserData, Lua, MetaMethod, UserData, UserDataMethods, Value};
use std::rc::Rc;

/// An owned copy of an object, or of one of its parts.
pub struct OwnedView {
    /// The copy.
    pub obj: Rc<OwnedObject>,
    /// Its fixed fields.
    pub record: Rc<Record>,
    /// The part this view stands for.
    pub part: Part,
}

impl UserData for OwnedView {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_function(
            MetaMethod::Index,
            |lua, (ud, key): (AnyUserData, mlua::LuaString)| {
                let this = ud.borrow::<OwnedView>()?;
                let obj = this.obj.view();
                let mut scratch = Vec::new();
                let field =
                    fields::field(&obj, &this.record, this.part, &key.as_bytes(), &mut scratch);
                match field {
                    Field::View(part) => {
                        let view = OwnedView {
                            obj: this.obj.clone(),
                            record: this.record.clone(),
                            part,
                        };
                        drop(this);
                        lua.create_userdata(view).map(Value::UserData)
                    }
                    Field::Table => fields::table(lua, &obj, this.part, &key.to_str()?),
                    Field::Unknown => super::index::method(lua, &key),
                    other => fields::to_value(lua, other, &scratch),
                }
            },
        );
        methods.add_meta_method(MetaMethod::ToString, |_, this, ()| {
            Ok(fields::describe(&this.obj.view(), this.part))
        });
    }
}

/// An owned copy of `obj`'s `part`.
pub fn copy_of(
    lua: &Lua,
    obj: &dnsluice_core::Object<'_>,
    part: Part,
) -> mlua::Result<AnyUserData> {
    let mut owned = OwnedObject::default();
    owned.copy_from(obj);
    let record = Record::of(&owned.view(), 0);
    lua.create_userdata(OwnedView {
        obj: Rc::new(owned),
        record: Rc::new(record),
        part,
    })
}
