//! Rust code reading what a Lua value names: a light view, an owned copy,
//! or (LuaJIT) an FFI view.

use super::owned::{self, OwnedView};
use super::slots::{self, ViewError};
use crate::fields::Part;
use mlua::{AnyUserData, Lua, Value};

/// Calls `f` with the object a view (light or owned) stands for, and the
/// part it stands for; a light view's slot is pinned meanwhile.
pub fn with_view<R>(
    value: &Value,
    f: impl for<'a> FnOnce(&dnsluice_core::Object<'a>, Part) -> R,
) -> Result<R, ViewError> {
    match value {
        Value::LightUserData(l) => slots::with_pinned(l.0 as usize, f),
        Value::UserData(ud) => {
            let this = ud
                .borrow::<OwnedView>()
                .map_err(|_| ViewError::NotAnObject("another userdata"))?;
            Ok(f(&this.obj.view(), this.part))
        }
        other => Err(ViewError::NotAnObject(other.type_name())),
    }
}

/// Makes an owned copy of the object a view stands for.
pub fn copy(lua: &Lua, value: &Value) -> mlua::Result<AnyUserData> {
    let value = normalize(lua, value)?;
    with_view(&value, |obj, part| owned::copy_of(lua, obj, part)).map_err(mlua::Error::external)?
}

/// A view as [`with_view`] takes it: an FFI view (LuaJIT) becomes the light
/// view of the same object; anything else is returned as it is.
pub fn normalize(lua: &Lua, value: &Value) -> mlua::Result<Value> {
    #[cfg(feature = "luajit")]
    if let Value::Other(_) = value {
        return super::jit::to_light(lua, value);
    }
    let _ = lua;
    Ok(value.clone())
}
