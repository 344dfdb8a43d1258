//! Timestamps reach Lua exactly in both builds: `ts_ns` (a Lua integer with
//! Lua 5.4, an `int64_t` cdata with LuaJIT), `ts_sec` and `ts_nsec`, read
//! every way a script can read a field, against tshark's `frame.time_epoch`
//! of nanosecond captures (nanoseconds a double would round: 1.7e18 is
//! above 2^53, where doubles are 256 ns apart).

use testkit::corpus::{corpus_dir, truth, truth_rows};
use testkit::{assert_ok, dnsluice, temp_dir};

/// Captures with nanosecond timestamps whose last digits are not zero.
const CAPTURES: [&str; 3] = [
    "live_any_linux_sll2_nsec.pcap",
    "pcapng_bigendian.pcapng",
    "pcapng_multi_if.pcapng",
];

/// Prints, for every packet and for each way of reading it, `WAY frame
/// ts_sec ts_nsec ts_ns kind delta`: `ts_ns` printed with `%d`, its kind
/// (`integer` with Lua 5.4, `cdata` with LuaJIT) and `ts_ns` minus the first
/// packet's (64-bit arithmetic in both builds); `WAY frame -` for a packet
/// without a timestamp (a pcapng simple packet block).
const SCRIPT: &str = r#"
local d = require('dnsluice')
local function kind(v) if jit then return type(v) end return math.type(v) end
local first
local function show(way, frame, ns, sec, nsec)
    if ns == nil and sec == nil and nsec == nil then print(way, frame, '-') return end
    first = first or ns
    print(way, frame, sec, nsec, string.format('%d', ns), kind(ns), string.format('%d', ns - first))
end
local function chain(stage)
    local input = d.stage('input.mmpcap', { path = arg[1] })
    local layer = d.stage('filter.layer')
    layer:producer(input)
    if stage then stage:producer(layer) return stage end
    return layer
end
-- Views of a chain of native stages (LuaJIT: FFI views).
for obj in chain():iter() do show('view', obj.frame, obj.ts_ns, obj.ts_sec, obj.ts_nsec) end
-- The fields named once.
for _, frame, ns, sec, nsec in chain():iter('frame', 'ts_ns', 'ts_sec', 'ts_nsec') do
    show('named', frame, ns, sec, nsec)
end
-- Inside filter.lua (views through the C API), and owned copies.
local copies = {}
local keep = d.stage('filter.lua', function(obj)
    show('lent', obj.frame, obj.ts_ns, obj.ts_sec, obj.ts_nsec)
    copies[#copies + 1] = obj:copy()
    return true
end)
-- A chain with a Lua stage, its fields named once (the C API iterator).
for _, frame, ns, sec, nsec in chain(keep):iter('frame', 'ts_ns', 'ts_sec', 'ts_nsec') do
    show('named-c', frame, ns, sec, nsec)
end
for _, c in ipairs(copies) do show('copy', c.frame, c.ts_ns, c.ts_sec, c.ts_nsec) end
"#;

/// tshark's time of each record (tshark's frames that are packets), in
/// order: (record, seconds and nanoseconds); the first records only when
/// the truth file keeps only those.
fn tshark_times(capture: &str) -> Vec<(u64, Option<(i64, i64)>)> {
    truth_rows(&truth(capture)["frames"])
        .iter()
        .filter_map(|row| {
            let record = row["record"].as_u64()?;
            let time = row["ts"].as_str().map(|ts| {
                let (sec, frac) = ts.split_once('.').unwrap_or((ts, "0"));
                let nsec = format!("{frac:0<9}");
                (sec.parse().unwrap(), nsec[..9].parse().unwrap())
            });
            Some((record, time))
        })
        .collect()
}

#[test]
fn timestamps_reach_lua_to_the_nanosecond_in_every_way_of_reading() {
    let dir = temp_dir("lua-numbers");
    let script = dir.join("times.lua");
    std::fs::write(&script, SCRIPT).unwrap();
    let kind = if cfg!(feature = "luajit") {
        "cdata"
    } else {
        "integer"
    };
    let ns_of = |(sec, nsec): (i64, i64)| i128::from(sec) * 1_000_000_000 + i128::from(nsec);
    for capture in CAPTURES {
        let out = dnsluice()
            .arg("script")
            .arg(&script)
            .arg(corpus_dir().join(capture))
            .output()
            .unwrap();
        assert_ok(&out, capture);
        let records = truth(capture)["counts"]["records"].as_u64().unwrap() as usize;
        let times = tshark_times(capture);
        assert!(
            times
                .iter()
                .any(|(_, t)| t.is_some_and(|(_, ns)| ns % 1000 != 0)),
            "{capture}: no nanosecond digits to check"
        );
        let first = ns_of(times[0].1.unwrap());
        let stdout = String::from_utf8(out.stdout).unwrap();
        for way in ["view", "named", "lent", "named-c", "copy"] {
            let want: Vec<String> = times
                .iter()
                .map(|&(frame, time)| match time {
                    Some((sec, nsec)) => {
                        let ns = ns_of((sec, nsec));
                        format!(
                            "{way}\t{frame}\t{sec}\t{nsec}\t{ns}\t{kind}\t{}",
                            ns - first
                        )
                    }
                    None => format!("{way}\t{frame}\t-"),
                })
                .collect();
            let got: Vec<&str> = stdout
                .lines()
                .filter(|l| l.split('\t').next() == Some(way))
                .collect();
            assert_eq!(got.len(), records, "{capture}: {way}: packets");
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g, w, "{capture}: {way}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
