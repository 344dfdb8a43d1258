//! A module added outside the engine is a registry module like any other for
//! Lua too: a script run with `script` and the script of a TOML `filter.lua`
//! stage both reach `filter.count-by-source` (the Lua states are made from
//! the registry the binary runs with, not from a copy taken earlier).

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn capture() -> PathBuf {
    root().join("tests/data/corpus/vlan_qinq.pcap")
}

/// tshark's `src` column of every IP frame of the capture, counted.
fn sources_by_tshark() -> BTreeMap<String, u64> {
    let path = root().join("tests/data/corpus/vlan_qinq.pcap.truth.json");
    let truth: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let columns = truth["frames"]["columns"].as_array().unwrap();
    let src = columns.iter().position(|c| c == "src").unwrap();
    let mut counts = BTreeMap::new();
    for row in truth["frames"]["rows"].as_array().unwrap() {
        if let Some(address) = row[src].as_str() {
            *counts.entry(address.to_string()).or_insert(0u64) += 1;
        }
    }
    assert!(!counts.is_empty());
    counts
}

/// A path for `name` under the target directory (cargo's scratch directory
/// for tests), not /tmp.
fn temp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("custom-module-{}-{name}", std::process::id()))
}

fn example(args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dnsluice-example-custom-module"))
        .current_dir(root())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Lua that runs input → filter.layer → filter.count-by-source on `pcap`
/// and leaves the module's counters in `counts` (`"src ADDRESS"` → n).
fn counting_chain(pcap: &Path) -> String {
    format!(
        "local input = require('dnsluice.input.mmpcap').new {{ path = {:?} }}\n\
         local layer = require('dnsluice.filter.layer').new()\n\
         local count = require('dnsluice.filter.count-by-source').new {{ top = 100 }}\n\
         count:producer(layer:producer(input))\n\
         for _ in count:iter() do end\n\
         counts = {{}}\n\
         for _, stage in ipairs(count:stats()) do\n\
             if stage.module == 'filter.count-by-source' then counts = stage.counters end\n\
         end\n",
        pcap.display().to_string()
    )
}

#[test]
fn a_lua_script_reaches_the_added_module() {
    let script = temp("count.lua");
    std::fs::write(
        &script,
        counting_chain(&capture())
            + "for k, v in pairs(counts) do print(k:sub(5) .. ' ' .. v) end\n",
    )
    .unwrap();
    let out = example(&["script".as_ref(), script.as_os_str()]);
    let got: BTreeMap<String, u64> = out
        .lines()
        .map(|line| {
            let (address, n) = line.rsplit_once(' ').unwrap();
            (address.to_string(), n.parse().unwrap())
        })
        .collect();
    assert_eq!(got, sources_by_tshark());
}

#[test]
fn a_toml_filter_lua_script_reaches_the_added_module() {
    // The script counts sources with the added module when it is loaded,
    // then keeps the packets of the busiest source.
    let script = temp("busiest.lua");
    std::fs::write(
        &script,
        counting_chain(&capture())
            + "local busiest, most = nil, 0\n\
               for k, v in pairs(counts) do if v > most then busiest, most = k:sub(5), v end end\n\
               function keep(obj) return obj.src == busiest end\n",
    )
    .unwrap();
    let pipeline = temp("busiest.toml");
    std::fs::write(
        &pipeline,
        format!(
            "[[stage]]\nmodule = \"input.mmpcap\"\npath = {:?}\n\n\
             [[stage]]\nmodule = \"filter.layer\"\n\n\
             [[stage]]\nmodule = \"filter.lua\"\nscript = {:?}\nfunction = \"keep\"\n\n\
             [[stage]]\nmodule = \"output.null\"\n",
            capture().display().to_string(),
            script.display().to_string()
        ),
    )
    .unwrap();
    let stats = temp("busiest.json");
    example(&[
        "run".as_ref(),
        pipeline.as_os_str(),
        "-q".as_ref(),
        "--stats-json".as_ref(),
        stats.as_os_str(),
    ]);
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let stage = &stats["stages"][2];
    assert_eq!(stage["module"], "filter.lua");
    let truth = sources_by_tshark();
    let most = truth.values().max().unwrap();
    assert_eq!(
        truth.values().filter(|n| *n == most).count(),
        1,
        "one busiest"
    );
    assert_eq!(stage["out"].as_u64(), Some(*most));
}
