//! A lookup run (input.lines → lookup.dns → output.parquet, against the
//! test knot: tests/servers/up.sh) read back by DuckDB: one row per name,
//! with the status, the nameserver, the tries and the answers the zone
//! generator (tests/servers/gen_zone.py) wrote: nI is 10.a.b.c
//! (`testkit::lookup_address`) with its TTL of 3600, www is a CNAME chain.

use serde_json::{json, Value};
use testkit::duckdb::queries;
use testkit::{assert_ok, lookup_address, run_pipeline, temp_dir};

/// TTL of every record of gen_zone.py's lookup.test.
const TTL: u64 = 3600;

/// Looks up the names of the file `names` on the test knot
/// (input.lines → lookup.dns with `lookup` options → output.parquet to
/// `out` with `parquet` options).
fn look_up(names: &std::path::Path, lookup: &str, out: &std::path::Path, parquet: &str) {
    let pipeline = format!(
        "[[stage]]\nmodule = \"input.lines\"\npath = \"{}\"\n[[stage]]\nmodule = \"lookup.dns\"\n{lookup}name_servers = [\"{}\"]\n[[stage]]\nmodule = \"output.parquet\"\npath = \"{}\"\n{parquet}",
        names.display(),
        testkit::servers().knot,
        out.display()
    );
    assert_ok(&run_pipeline(&pipeline, &["-q"]), "lookup run");
}

#[test]
fn lookup_records_read_back_with_the_zone_generators_answers() {
    let servers = testkit::servers();
    let dir = temp_dir("parquet-lookup");
    let names = dir.join("names.txt");
    let mut text: String = (0..300).map(|i| format!("n{i}.lookup.test\n")).collect();
    text += "missing.lookup.test\nwww.lookup.test\n";
    std::fs::write(&names, text).unwrap();
    let out = dir.join("lookups.parquet");
    look_up(&names, "", &out, "row_group_rows = 100\n");
    let file = out.display().to_string();
    let [rows, statuses] = <[Vec<Value>; 2]>::try_from(queries(&[
        format!("SELECT kind, qname, qtype, status, rcode, nameserver, tries, time IS NOT NULL AS timed, answers FROM '{file}'"),
        format!("SELECT status, count(*) AS n FROM '{file}' GROUP BY status ORDER BY status"),
    ]))
    .unwrap();
    assert_eq!(rows.len(), 302);
    assert_eq!(
        statuses,
        [
            json!({"status": "NOERROR", "n": 301}),
            json!({"status": "NXDOMAIN", "n": 1})
        ]
    );
    let by_name: std::collections::HashMap<&str, &Value> = rows
        .iter()
        .map(|r| (r["qname"].as_str().unwrap(), r))
        .collect();
    for i in 0..300u32 {
        let name = format!("n{i}.lookup.test");
        let r = by_name[name.as_str()];
        assert_eq!(r["kind"], "lookup");
        // The type the stage asked: lookup.dns's default, A.
        assert_eq!(r["qtype"], "A");
        assert_eq!(r["rcode"], "NOERROR");
        assert_eq!(r["nameserver"], servers.knot.to_string());
        assert_eq!(r["tries"], 1);
        assert_eq!(r["timed"], true);
        assert_eq!(
            r["answers"],
            json!([{"name": name, "type": "A", "ttl": TTL, "data": lookup_address(i).to_string()}]),
            "{r}"
        );
    }
    assert_eq!(by_name["missing.lookup.test"]["answers"], json!([]));
    // www CNAME alias, alias CNAME target, target A 192.0.2.80.
    let chain: Vec<(String, String)> = by_name["www.lookup.test"]["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["type"].as_str().unwrap().into(),
                a["data"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        chain,
        [
            ("CNAME".to_string(), "alias.lookup.test.".to_string()),
            ("CNAME".into(), "target.lookup.test.".into()),
            ("A".into(), "192.0.2.80".into()),
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The question type of a ZDNS-shaped record is its `results` key, and a
/// module (which asks several types) leaves `qtype` empty.
#[test]
fn lookup_rows_carry_the_type_asked_in_both_shapes() {
    let dir = temp_dir("parquet-lookup-types");
    let names = dir.join("names.txt");
    std::fs::write(&names, "n1.lookup.test\nn2.lookup.test\n").unwrap();
    for (asked, format, expected) in [
        ("MX", "zdns", json!("MX")),
        ("TXT", "native", json!("TXT")),
        ("MXLOOKUP", "native", Value::Null),
        ("MXLOOKUP", "zdns", Value::Null),
    ] {
        let out = dir.join(format!("{asked}-{format}.parquet"));
        let lookup = format!("type = \"{asked}\"\noutput_format = \"{format}\"\n");
        look_up(&names, &lookup, &out, "");
        let [rows] = <[Vec<Value>; 1]>::try_from(queries(&[format!(
            "SELECT qname, qtype FROM '{}' ORDER BY qname",
            out.display()
        )]))
        .unwrap();
        assert_eq!(
            rows,
            [
                json!({"qname": "n1.lookup.test", "qtype": expected}),
                json!({"qname": "n2.lookup.test", "qtype": expected}),
            ],
            "{asked} as {format}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
