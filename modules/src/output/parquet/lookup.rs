//! The row of a lookup record (`lookup.dns`'s JSON record, dnsluice's shape
//! or ZDNS's): the name as `qname`, the record type asked as `qtype` (the
//! record's `type`, or ZDNS's `results` key; none for a module such as
//! `MXLOOKUP`, which asks several), `status`, `nameserver`, `tries`
//! (`attempts`), `duration_ms`, the time, and the answers of `data.answers`.
//! The record is parsed once (the cold path: lookups come at thousands a
//! second, not millions).

use super::columns::Columns;
use dnsluice_core::dns::mnemonic;
use dnsluice_resolver::LookupType;
use serde_json::{Map, Value};

/// Appends the row of `record`; `false` (nothing appended) when it is not
/// a JSON object.
pub fn lookup_row(record: &str, c: &mut Columns) -> bool {
    let Ok(Value::Object(top)) = serde_json::from_str::<Value>(record) else {
        return false;
    };
    // ZDNS's shape keeps the result under `results.<MODULE>`.
    let zdns = top
        .get("results")
        .and_then(Value::as_object)
        .and_then(|r| r.iter().next());
    let asked = zdns
        .map(|(module, _)| module.as_str())
        .or_else(|| top.get("type")?.as_str());
    let zdns = zdns.and_then(|(_, result)| result.as_object());
    let result = zdns.unwrap_or(&top);
    c.kind.push("lookup");
    let text = |map: &Map<String, Value>, key: &str| {
        map.get(key).and_then(Value::as_str).map(str::to_string)
    };
    if let Some(time) = text(result, "timestamp").and_then(|t| parse_rfc3339(&t)) {
        c.time.push(time);
    }
    if let Some(name) = text(&top, "name") {
        c.qname.push(name.as_bytes());
    }
    if let Some(LookupType::Single(qtype)) = asked.and_then(|t| LookupType::parse(t).ok()) {
        c.qtype.push(mnemonic::rtype(qtype));
    }
    if let Some(status) = text(result, "status") {
        if mnemonic::rcode_from_str(&status).is_some() {
            c.rcode.push(status.clone());
        }
        c.status.push(status.as_bytes());
    }
    let data = result.get("data");
    let nameserver = text(&top, "nameserver")
        .or_else(|| data.and_then(|d| d.get("resolver")?.as_str().map(str::to_string)));
    if let Some(ns) = nameserver {
        c.nameserver.push(ns.as_bytes());
    }
    if let Some(protocol) = data.and_then(|d| d.get("protocol")?.as_str()) {
        c.transport.push(protocol.to_string());
    }
    if let Some(tries) = top.get("attempts").and_then(Value::as_u64) {
        c.tries.push(i32::try_from(tries).unwrap_or(i32::MAX));
    }
    let duration = top
        .get("duration_ms")
        .and_then(Value::as_f64)
        .or_else(|| result.get("duration")?.as_f64().map(|s| s * 1e3));
    c.duration_ms.push_opt(duration);
    match data
        .and_then(|d| d.get("answers"))
        .and_then(Value::as_array)
    {
        Some(answers) => {
            c.answers.open();
            for a in answers.iter().filter_map(Value::as_object) {
                answer(a, c);
            }
            c.answers.close();
        }
        None if data.is_some() => {
            c.answers.open();
            c.answers.close();
        }
        None => {}
    }
    c.end_row();
    true
}

/// One record of `data.answers`: `answer` is its data when it has one
/// (A, AAAA, NS, CNAME, PTR, MX's exchange, TXT), else its other fields as
/// a JSON object (SOA, SRV, CAA, ...).
fn answer(a: &Map<String, Value>, c: &mut Columns) {
    let (Some(name), Some(rtype)) = (
        a.get("name").and_then(Value::as_str),
        a.get("type").and_then(Value::as_str),
    ) else {
        return;
    };
    let ttl = a.get("ttl").and_then(Value::as_i64).unwrap_or(0);
    c.answers.record(
        |out| {
            out.extend_from_slice(name.as_bytes());
            true
        },
        rtype.to_string().into(),
        ttl,
        |out| match a.get("answer").and_then(Value::as_str) {
            Some(text) => out.extend_from_slice(text.as_bytes()),
            None => {
                let rest: Map<String, Value> = a
                    .iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "name" | "type" | "class" | "ttl"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let _ = serde_json::to_writer(out, &rest);
            }
        },
    );
}

/// Nanoseconds since the Unix epoch of an RFC 3339 time in UTC
/// (`2024-01-01T00:00:00.123456789Z`, the fraction optional).
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let (date, time) = text.strip_suffix('Z')?.split_once('T')?;
    let mut d = date.splitn(3, '-').map(str::parse::<i64>);
    let (year, month, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut t = clock.splitn(3, ':').map(str::parse::<i64>);
    let (h, m, s) = (t.next()?.ok()?, t.next()?.ok()?, t.next()?.ok()?);
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let nanos: i64 = format!("{fraction:0<9}").parse().ok()?;
    let seconds = days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s;
    seconds.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm, the inverse of `dnsluice_core::time::civil_from_days`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse_rfc3339;

    #[test]
    fn rfc3339_times_become_nanoseconds() {
        // `date -u -d 2024-02-29T12:34:56Z +%s` = 1709210096
        assert_eq!(
            parse_rfc3339("2024-02-29T12:34:56.5Z"),
            Some(1_709_210_096_500_000_000)
        );
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2024-02-29 12:34:56Z"), None);
    }
}
