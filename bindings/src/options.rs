//! Lua values → TOML values, so that Lua stages take the options TOML stages do.

use mlua::Value;

/// Converts an option's value; `None` for `nil` (the option is unset).
///
/// Whole numbers become integers (LuaJIT has no integer type); a table with
/// keys `1..n` becomes an array, any other table a TOML table.
pub fn to_toml(value: &Value) -> Result<Option<toml::Value>, String> {
    Ok(Some(match value {
        Value::Nil => return Ok(None),
        Value::Boolean(b) => toml::Value::Boolean(*b),
        // `mlua::Integer` is `i64` with Lua 5.4 and `isize` with LuaJIT.
        #[allow(clippy::unnecessary_cast)]
        Value::Integer(i) => toml::Value::Integer(*i as i64),
        Value::Number(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => toml::Value::Integer(*x as i64),
        Value::Number(x) => toml::Value::Float(*x),
        Value::String(s) => toml::Value::String(
            s.to_str()
                .map_err(|_| "strings must be UTF-8".to_string())?
                .to_owned(),
        ),
        Value::Table(t) => {
            let len = t.raw_len();
            let pairs = t.pairs::<Value, Value>().count();
            if len == pairs && len > 0 {
                let mut items = Vec::with_capacity(len);
                for v in t.sequence_values::<Value>() {
                    let v = v.map_err(|e| e.to_string())?;
                    items.extend(to_toml(&v)?);
                }
                toml::Value::Array(items)
            } else {
                let mut table = toml::Table::new();
                for pair in t.pairs::<Value, Value>() {
                    let (k, v) = pair.map_err(|e| e.to_string())?;
                    let Value::String(k) = k else {
                        return Err(format!("table keys must be strings, got {}", k.type_name()));
                    };
                    let k = k.to_str().map_err(|e| e.to_string())?.to_owned();
                    if let Some(v) = to_toml(&v)? {
                        table.insert(k, v);
                    }
                }
                toml::Value::Table(table)
            }
        }
        other => {
            return Err(format!(
                "expected a string, number, boolean or table, got {}",
                other.type_name()
            ))
        }
    }))
}
