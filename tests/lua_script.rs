//! `dnsluice script`: errors with file:line, views, filter.lua (Lua and TOML),
//! modules written in Lua in push and pull chains.

use std::path::PathBuf;
use std::process::Output;
use testkit::corpus::{corpus_dir, truth, truth_rows};
use testkit::{assert_ok, dnsluice, run_new_executable_ok, run_pipeline, temp_dir};

const CAPTURE: &str = "live_mini_en10mb.pcap";

fn capture() -> PathBuf {
    corpus_dir().join(CAPTURE)
}

/// tshark's DNS messages of the test capture.
fn truth_messages() -> Vec<serde_json::Map<String, serde_json::Value>> {
    truth_rows(&truth(CAPTURE)["dns_messages"])
}

/// Writes `text` as `NAME` in a fresh directory and runs it with the capture as arg[1].
fn script(name: &str, text: &str) -> (Output, String) {
    let dir = temp_dir("lua");
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    let out = dnsluice()
        .current_dir(&dir)
        .arg("script")
        .arg(name)
        .arg(capture())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let _ = std::fs::remove_dir_all(&dir);
    (out, err)
}

fn fails_with(name: &str, text: &str, wanted: &[&str]) {
    let (out, err) = script(name, text);
    assert!(!out.status.success(), "{name} should fail");
    for w in wanted {
        assert!(err.contains(w), "{name}: stderr lacks {w:?}:\n{err}");
    }
}

const CHAIN: &str = "local d = require('dnsluice')\n\
    local input = d.stage('input.mmpcap', {path = arg[1]})\n\
    local layer = d.stage('filter.layer')\n\
    local dns = d.stage('filter.dns')\n";

#[test]
fn syntax_errors_name_file_and_line() {
    fails_with(
        "syntax.lua",
        "local x = 1\nprint(1 +)\n",
        &["syntax.lua:2:"],
    );
}

#[test]
fn runtime_errors_name_file_and_line_with_a_traceback() {
    fails_with(
        "runtime.lua",
        "local t\nlocal function f() return t.x end\nf()\n",
        &[
            "runtime.lua:2: attempt to index",
            "stack traceback",
            "runtime.lua:3",
        ],
    );
}

#[test]
fn wrong_option_names_and_types_are_clear_errors() {
    fails_with(
        "name.lua",
        "\nlocal i = require('dnsluice.input.mmpcap').new{ pth = 'x' }\n",
        &["name.lua:2: input.mmpcap: unknown option `pth`; options are: path"],
    );
    fails_with(
        "setter.lua",
        "local i = require('dnsluice.input.mmpcap').new()\ni:speed(3)\n",
        &["setter.lua:2:", "unknown option `speed`"],
    );
    fails_with(
        "type.lua",
        &format!("{CHAIN}dns:set('ports', 'x')\ndns:producer(layer:producer(input))\nprint(dns:produce())\n"),
        &["type.lua:7:", "filter.dns: option `ports`"],
    );
    fails_with(
        "module.lua",
        "require('dnsluice').stage('filter.nope')\n",
        &["module.lua:1: unknown module `filter.nope`; modules are:"],
    );
    fails_with(
        "file.lua",
        "local i = require('dnsluice.input.mmpcap').new{ path = '/nonexistent.pcap' }\nfor o in i:iter() do end\n",
        &["file.lua:2:", "/nonexistent.pcap"],
    );
}

#[test]
fn options_table_setters_and_open_are_equivalent() {
    let (out, _) = script(
        "setters.lua",
        "local a = require('dnsluice.input.mmpcap').new{ path = arg[1] }\n\
         local b = require('dnsluice.input.mmpcap').new()\nb:path(arg[1])\n\
         local c = require('dnsluice.input.mmpcap').new()\nc:open(arg[1])\n\
         for _, x in ipairs{a, b, c} do local n = 0 for o in x:iter() do n = n + 1 end print(n) end\n",
    );
    assert_ok(&out, "dnsluice script");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1517\n1517\n1517\n");
}

#[test]
fn a_view_is_stale_after_the_next_object_and_a_copy_is_not() {
    let (out, err) = script(
        "stale.lua",
        &format!(
            "{CHAIN}dns:producer(layer:producer(input))\n\
             local a = dns:produce()\nlocal kept = a:copy()\nlocal b = dns:produce()\n\
             print(kept.frame, kept.dns.id, kept.dns.qname, b.frame)\nprint(a.frame)\n"
        ),
    );
    assert!(!out.status.success());
    let first = &truth_messages()[0];
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "{}\t{}\t{}.\t{}\n",
            first["frame"],
            first["id"],
            first["qname"].as_str().unwrap(),
            2
        )
    );
    assert!(err.contains("stale.lua:10: stale object"), "{err}");
}

#[test]
fn fields_follow_the_json_names() {
    let (out, _) = script(
        "fields.lua",
        &format!(
            "{CHAIN}dns:producer(layer:producer(input))\nlocal o = dns:produce()\nlocal m = o.dns\n\
             print(o.frame, o.ip, o.src, o.dst, o.transport, o.sport, o.dport, o.link, #o.payload == o.payload_len)\n\
             print(m.id, m.qr, m.opcode, m.rcode, m.qdcount, m.qname, m.qtype, m.qclass, m.flags.rd, #m.question, m.question[1].type)\n"
        ),
    );
    assert_ok(&out, "dnsluice script");
    let t = &truth_messages()[0];
    let want = format!(
        "{}\t4\t{}\t{}\tudp\t{}\t{}\tEN10MB\ttrue\n{}\tfalse\tQUERY\tNOERROR\t1\t{}.\t{}\tIN\ttrue\t1\t{}\n",
        t["frame"], t["src"].as_str().unwrap(), t["dst"].as_str().unwrap(), t["sport"], t["dport"],
        t["id"], t["qname"].as_str().unwrap(), t["qtype_name"].as_str().unwrap(), t["qtype_name"].as_str().unwrap()
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
}

#[test]
fn an_error_inside_filter_lua_stops_the_run_with_its_message() {
    fails_with(
        "boom.lua",
        &format!(
            "{CHAIN}local f = d.stage('filter.lua', function(o)\n  if o.frame == 5 then error('boom at five') end\n  return true\nend)\n\
             input:receiver(layer):receiver(dns):receiver(f):receiver(d.stage('output.null'))\ninput:run()\n"
        ),
        &["boom.lua:10:", "filter.lua: boom.lua:6: boom at five", "stack traceback"],
    );
}

/// A TOML pipeline: the test capture, layers, DNS, `filter.lua` calling
/// `function` of `script`, JSON lines to `json`.
fn filter_lua_pipeline(script: &std::path::Path, function: &str, json: &std::path::Path) -> String {
    format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.layer\"\n\
         [[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"filter.lua\"\nscript = \"{}\"\nfunction = \"{function}\"\n\
         [[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n",
        capture().display(),
        script.display(),
        json.display()
    )
}

#[test]
fn filter_lua_in_a_toml_pipeline() {
    let dir = temp_dir("toml-lua");
    let script = dir.join("keep.lua");
    std::fs::write(
        &script,
        "function nxdomain(obj)\n  return obj.dns.rcode == 'NXDOMAIN'\nend\n\
         function broken(obj)\n  return obj.dns.nope\nend\n",
    )
    .unwrap();
    let json = dir.join("out.jsonl");
    let pipeline = |function: &str| filter_lua_pipeline(&script, function, &json);
    for drive in ["", "drive = \"pull\"\n"] {
        let out = run_pipeline(&format!("{drive}{}", pipeline("nxdomain")), &["-q"]);
        assert_ok(&out, "dnsluice run");
        let lines = std::fs::read_to_string(&json).unwrap().lines().count();
        let want = truth_messages().iter().filter(|r| r["rcode"] == 3).count();
        assert_eq!(lines, want);
    }
    let out = run_pipeline(&pipeline("broken"), &["-q"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("keep.lua:5:") && err.contains("no field `nope`"),
        "{err}"
    );
    let out = run_pipeline(&pipeline("missing"), &["-q"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no global function `missing`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lua_modules_in_push_and_pull_chains() {
    let udp = truth_messages()
        .iter()
        .filter(|r| r["transport"] == "udp")
        .count();
    // Push: input → layer → (Lua: keep UDP) → dns → (Lua: count); finish is called.
    let (out, _) = script(
        "push.lua",
        &format!(
            "{CHAIN}local udp = d.module({{ receive = function(self, o)\n\
               if o.transport == 'udp' then self:pass(o) end end }}, 'udp only')\n\
             local n = 0\nlocal count = d.module({{ receive = function(self, o) n = n + 1 end,\n\
               finish = function(self) print('finished', n) end }})\n\
             input:receiver(layer):receiver(udp):receiver(dns):receiver(count)\ninput:run()\n"
        ),
    );
    assert_ok(&out, "dnsluice run");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("finished\t{udp}\n")
    );
    // Pull: dns (native) pulls from a Lua module that pulls from layer: producer ← lua → receiver.
    let (out, _) = script(
        "pull.lua",
        &format!(
            "{CHAIN}local udp = d.module({{ produce = function(self)\n\
               while true do local o = self:pull()\n\
                 if o == nil or o.transport == 'udp' then return o end end end }})\n\
             dns:producer(udp:producer(layer:producer(input)))\n\
             local n = 0\nfor o in dns:iter() do n = n + 1 end\nprint(n)\n"
        ),
    );
    assert_ok(&out, "dnsluice script");
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{udp}\n"));
}

#[test]
fn shebang_scripts_run_with_their_arguments() {
    let dir = temp_dir("shebang");
    let file = dir.join("tool.lua");
    std::fs::write(
        &file,
        format!(
            "#!/usr/bin/env -S {} script\nprint(arg[0] ~= nil, arg[1], arg[2], #arg)\n",
            testkit::dnsluice_exe().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    // spawns: env (the script's shebang line runs our binary through it)
    let out = run_new_executable_ok(std::process::Command::new(&file).args(["one", "--two"]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "true\tone\t--two\t2\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `text` with `pcap` (a corpus file) as arg[1]; returns stdout.
fn script_on(pcap: &str, text: &str) -> String {
    let dir = temp_dir("lua-iter");
    let file = dir.join("iter.lua");
    std::fs::write(&file, text).unwrap();
    let out = dnsluice()
        .arg("script")
        .arg(&file)
        .arg(corpus_dir().join(pcap))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_ok(&out, format_args!("{pcap}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn iter_with_field_names_returns_each_message_with_those_fields() {
    // UDP (handed on in place), TCP with multi-segment messages and IP
    // fragments (copied through filter.dns's queue): every message, in order.
    // Three of the fields are strings made for the call (the addresses and
    // the name), in one scratch buffer, one after the other.
    for pcap in [CAPTURE, "ipv4_fragments.pcap", "ipv6_exthdr.pcap"] {
        let out = script_on(
            pcap,
            &format!(
                "{CHAIN}dns:producer(layer:producer(input))\n\
                 for obj, frame, src, id, qname, qtype, transport, dst in dns:iter('frame', 'src', 'id', 'qname', 'qtype_code', 'transport', 'dst') do\n\
                 assert(obj.frame == frame and obj.dns.id == id and obj.dns.qname == qname)\n\
                 print(frame, src, id, qname, qtype, transport, dst)\nend\n"
            ),
        );
        let truth = truth(pcap);
        let want: String = truth_rows(&truth["dns_messages"])
            .iter()
            .map(|t| {
                let qname = match t["qname"].as_str() {
                    Some("<Root>") | Some("") => ".".to_string(),
                    Some(name) => format!("{name}."),
                    None => "nil".to_string(),
                };
                let qtype = match &t["qtype"] {
                    serde_json::Value::Null => "nil".to_string(),
                    code => code.to_string(),
                };
                let transport = t["transport"].as_str().unwrap();
                let (src, dst) = (t["src"].as_str().unwrap(), t["dst"].as_str().unwrap());
                format!(
                    "{}\t{src}\t{}\t{qname}\t{qtype}\t{transport}\t{dst}\n",
                    t["frame"], t["id"]
                )
            })
            .collect();
        assert_eq!(out, want, "{pcap}");
    }
}

#[test]
fn iter_fields_of_the_dns_part_are_nil_for_other_objects() {
    let out = script_on(
        CAPTURE,
        &format!(
            "{CHAIN}dns:set('keep_non_dns', true)\ndns:producer(layer:producer(input))\n\
             local dns_seen, other = 0, 0\n\
             for obj, frame, qr, dns in dns:iter('frame', 'qr', 'dns') do\n\
             if dns == nil then assert(qr == nil and obj.dns == nil); other = other + 1\n\
             else assert(qr == obj.dns.qr and frame == obj.frame); dns_seen = dns_seen + 1 end\nend\n\
             print(dns_seen, other)\n"
        ),
    );
    let messages = truth_messages().len();
    let (seen, other) = out.trim().split_once('\t').unwrap();
    assert_eq!(seen, messages.to_string());
    // Packets that carry no whole message of their own (TCP handshakes, segments
    // of longer messages) are passed on as they are: every frame in which
    // tshark finds no message ends (its truth file's counts).
    let counts = &truth(CAPTURE)["counts"];
    let without = counts["records"].as_u64().unwrap() - counts["dns_frames"].as_u64().unwrap();
    assert_eq!(other, without.to_string(), "{out}");
}

#[test]
fn iter_rejects_a_field_that_does_not_exist() {
    fails_with(
        "badfield.lua",
        &format!(
            "{CHAIN}dns:producer(layer:producer(input))\n\
             for obj in dns:iter('qname', 'nope') do end\n"
        ),
        &["badfield.lua:6:", "iter: objects have no field `nope`"],
    );
}

#[test]
fn stats_gives_the_counters_of_a_pulled_or_run_chain() {
    let counts = truth(CAPTURE)["counts"].clone();
    let print_stats = "for _, s in ipairs(st) do print(s.module, s.input, s.output, \
                       s.counters.queries or '-', s.counters.responses or '-') end\n";
    // Pulled: live counters of the stages `dns` pulls from, and its own.
    let pulled = script_on(
        CAPTURE,
        &format!(
            "{CHAIN}dns:producer(layer:producer(input))\nlocal n = 0\n\
             for _ in dns:iter() do n = n + 1 end\nprint(n)\nlocal st = dns:stats()\n{print_stats}"
        ),
    );
    // Run: the whole chain, once it is done.
    let ran = script_on(
        CAPTURE,
        &format!(
            "{CHAIN}local null = d.stage('output.null')\n\
             input:receiver(layer):receiver(dns):receiver(null)\nprint(input:run())\n\
             local st = input:stats()\n{print_stats}"
        ),
    );
    let (frames, messages) = (&counts["records"], &counts["dns_messages"]);
    let (queries, responses) = (&counts["dns_queries"], &counts["dns_responses"]);
    let dns_line = format!("filter.dns\t{frames}\t{messages}\t{queries}\t{responses}\n");
    assert_eq!(
        pulled,
        format!(
            "{messages}\ninput.mmpcap\t{frames}\t{frames}\t-\t-\nfilter.layer\t{frames}\t{frames}\t-\t-\n{dns_line}"
        )
    );
    assert_eq!(
        ran,
        format!(
            "{frames}\ninput.mmpcap\t{frames}\t{frames}\t-\t-\nfilter.layer\t{frames}\t{frames}\t-\t-\n{dns_line}\
             output.null\t{messages}\t0\t-\t-\n"
        )
    );
    // Before anything ran, a clear error.
    fails_with(
        "nostats.lua",
        &format!("{CHAIN}dns:producer(layer:producer(input))\nprint(dns:stats())\n"),
        &["nostats.lua:6:", "filter.dns: no counters yet"],
    );
}

#[test]
fn iter_returns_table_fields_too() {
    let out = script_on(
        CAPTURE,
        &format!(
            "{CHAIN}dns:producer(layer:producer(input))\n\
             for _, flags, question, id in dns:iter('flags', 'question', 'id') do\n\
             print(id, flags.rd, flags.aa, question[1] and question[1].name)\nend\n"
        ),
    );
    let want: String = truth_messages()
        .iter()
        .map(|t| {
            let flag = |k: &str| t[k].as_u64().unwrap() == 1;
            let name = match t["qname"].as_str() {
                Some("<Root>") | Some("") => ".".to_string(),
                Some(name) if t["qdcount"].as_u64() > Some(0) => format!("{name}."),
                _ => "nil".to_string(),
            };
            format!("{}\t{}\t{}\t{name}\n", t["id"], flag("rd"), flag("aa"))
        })
        .collect();
    assert_eq!(out, want);
}

/// Runs `text` with `pcap` (a corpus file) as arg[1]; its standard output.
fn run_on(name: &str, pcap: &str, text: &str) -> String {
    let dir = temp_dir("lua-on");
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    let out = dnsluice()
        .arg("script")
        .arg(&file)
        .arg(corpus_dir().join(pcap))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_ok(&out, "dnsluice run");
    String::from_utf8(out.stdout).unwrap()
}

/// The mnemonics of the natural style (`m.qtype`, `m.rcode`), which the
/// LuaJIT view caches per code, name every message's codes right in turn:
/// QTYPEs 1 to 255 (held in the cache's array part), 257 (CAA) and 65534 (in
/// its hash part) and RCODEs, checked against tshark's QTYPE names and
/// RCODE numbers of every message (RCODE names as RFC 1035 §4.1.1, RFC
/// 2136 and RFC 6891 give them).
#[test]
fn natural_mnemonics_name_every_message_s_codes_as_tshark_does() {
    let loop_text = format!(
        "{CHAIN}dns:producer(layer:producer(input))\n\
         for obj in dns:iter() do\n\
           local m = obj.dns\n\
           print((m.qtype or '-') .. '\\t' .. (m.rcode or '-'))\n\
         end\n"
    );
    let got = run_on("mnemonics.lua", CAPTURE, &loop_text);
    let rows = truth_rows(&truth(CAPTURE)["dns_messages"]);
    let rcode_names = [
        "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED",
    ];
    let want: Vec<String> = rows
        .iter()
        .map(|t| {
            // tshark names QTYPE 255 `*` and 65534 `Unknown`; zone files
            // (RFC 3597 §5) and we: `ANY`, `TYPE65534`.
            let qtype = match (t["qtype"].as_u64(), t["qtype_name"].as_str()) {
                (Some(255), _) => "ANY".to_string(),
                (Some(code), Some("Unknown")) => format!("TYPE{code}"),
                (Some(_), Some(name)) => name.to_string(),
                _ => "-".to_string(),
            };
            // The full RCODE: EDNS's upper bits over the header's (RFC 6891 §6.1.3).
            let ext = t["edns"]["ext_rcode"].as_u64().unwrap_or(0);
            let rcode = t["rcode"].as_u64().map_or("-", |r| match ext << 4 | r {
                16 => "BADVERS",
                full => rcode_names[full as usize],
            });
            format!("{qtype}\t{rcode}")
        })
        .collect();
    let got: Vec<&str> = got.lines().collect();
    assert_eq!(got.len(), want.len(), "messages");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "message {i}");
    }
    // The capture has codes on both sides of the cache's array part.
    for name in [
        "A",
        "AAAA",
        "CAA",
        "TYPE65534",
        "ANY",
        "NXDOMAIN",
        "BADVERS",
    ] {
        assert!(
            want.iter().any(|l| l.split('\t').any(|f| f == name)),
            "{name}"
        );
    }
}

/// The natural style (`obj.dns`, then `m.FIELD`) reads every scalar field
/// right, message after message: the fast path of each Lua build (the
/// object's record; with LuaJIT, FFI views compiled by the JIT), checked
/// against tshark's fields of every DNS message of two captures.
#[test]
fn natural_field_reads_agree_with_tshark_on_every_message() {
    let loop_text = format!(
        "{CHAIN}dns:producer(layer:producer(input))\n\
         local function n(b) if b == nil then return '-' elseif b then return 1 else return 0 end end\n\
         for obj in dns:iter() do\n\
           local m = obj.dns\n\
           local e = m.edns\n\
           local edns = '-'\n\
           if e ~= nil then edns = e.udp_size .. '/' .. e.ext_rcode .. '/' .. e.version .. '/' .. n(e['do']) .. '/' .. #e.options end\n\
           print(table.concat({{obj.frame, obj.ip, obj.transport, obj.src, obj.sport, obj.dst, obj.dport,\n\
             m.id, n(m.qr), m.opcode_code, m.rcode_code, n(m.aa), n(m.tc), n(m.rd), n(m.ra), n(m.ad), n(m.cd),\n\
             m.qdcount, m.ancount, m.nscount, m.arcount, m.qname or '-', m.qtype_code or '-', m.qclass_code or '-', edns}}, '\\t'))\n\
         end\n"
    );
    for pcap in [CAPTURE, "dns_edns_compression.pcap"] {
        let got = run_on("natural.lua", pcap, &loop_text);
        let rows = truth_rows(&truth(pcap)["dns_messages"]);
        let want: Vec<String> = rows
            .iter()
            .map(|t| {
                let val = |k: &str| match &t[k] {
                    serde_json::Value::Null => "-".to_string(),
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let edns = match &t["edns"] {
                    serde_json::Value::Null => "-".to_string(),
                    e => format!(
                        "{}/{}/{}/{}/{}",
                        e["udp_size"],
                        e["ext_rcode"],
                        e["version"],
                        e["do"],
                        e["options"].as_array().unwrap().len()
                    ),
                };
                let ext = t["edns"]["ext_rcode"].as_i64().unwrap_or(0);
                let rcode = t["rcode"]
                    .as_i64()
                    .map_or("-".to_string(), |r| (ext << 4 | r).to_string());
                let qname = match &t["qname"] {
                    serde_json::Value::String(name)
                        if ["", ".", "<Root>"].contains(&name.as_str()) =>
                    {
                        ".".to_string()
                    }
                    // tshark shows a name's bytes as they are, we escape them
                    // as in zone files: such names are not compared.
                    serde_json::Value::String(name)
                        if !name
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) =>
                    {
                        "?".to_string()
                    }
                    serde_json::Value::String(name) => format!("{name}."),
                    _ => "-".to_string(),
                };
                let mut fields: Vec<String> = [
                    "frame",
                    "ip",
                    "transport",
                    "src",
                    "sport",
                    "dst",
                    "dport",
                    "id",
                    "qr",
                    "opcode",
                ]
                .iter()
                .map(|k| val(k))
                .collect();
                fields.push(rcode);
                for k in [
                    "aa", "tc", "rd", "ra", "ad", "cd", "qdcount", "ancount", "nscount", "arcount",
                ] {
                    fields.push(val(k));
                }
                fields.push(qname);
                fields.push(val("qtype"));
                fields.push(val("qclass"));
                fields.push(edns);
                fields.join("\t")
            })
            .collect();
        let got: Vec<&str> = got.lines().collect();
        assert_eq!(got.len(), want.len(), "{pcap}: messages");
        for (g, w) in got.iter().zip(&want) {
            let g: Vec<&str> = g.split('\t').collect();
            let w: Vec<&str> = w.split('\t').collect();
            assert_eq!(g.len(), w.len(), "{pcap}: {g:?}");
            for (i, (g, w)) in g.iter().zip(&w).enumerate() {
                assert!(
                    g == w || (i == 21 && *w == "?"),
                    "{pcap}: field {i}: {g} vs {w}"
                );
            }
        }
    }
}

/// A view read after the chain moved on is an error in the fast path too,
/// field by field and part by part: inside a hot loop (which LuaJIT
/// compiles), and after the loop ended (the slot is empty).
#[test]
fn a_stale_view_from_iter_raises_an_error_in_the_fast_path() {
    let out = run_on(
        "stale-fast.lua",
        CAPTURE,
        &format!(
            "{CHAIN}dns:producer(layer:producer(input))\n\
             local fields = {{'frame', 'ts_ns', 'len', 'sport', 'src', 'transport', 'dns'}}\n\
             local dns_fields = {{'qr', 'id', 'qdcount', 'rcode', 'qname', 'qtype', 'edns', 'rd'}}\n\
             local prev, prev_dns, n, stale = nil, nil, 0, 0\n\
             local function is_stale(ok, e) return not ok and string.find(e, 'stale object', 1, true) ~= nil end\n\
             for obj in dns:iter() do\n\
               local m = obj.dns\n\
               if m.qr or m.qdcount > 0 then n = n + 1 end\n\
               if prev ~= nil then\n\
                 if is_stale(pcall(function() return prev.frame end)) then stale = stale + 1 end\n\
                 if is_stale(pcall(function() return prev_dns.qr end)) then stale = stale + 1 end\n\
               end\n\
               prev, prev_dns = obj, m\n\
             end\n\
             print(n, stale)\n\
             for _, f in ipairs(fields) do print(f, is_stale(pcall(function() return prev[f] end))) end\n\
             for _, f in ipairs(dns_fields) do print(f, is_stale(pcall(function() return prev_dns[f] end))) end\n\
             print('copy', is_stale(pcall(function() return prev:copy() end)))\n"
        ),
    );
    let messages = truth_messages().len();
    let mut want = format!("{messages}\t{}\n", 2 * (messages - 1));
    for f in [
        "frame",
        "ts_ns",
        "len",
        "sport",
        "src",
        "transport",
        "dns",
        "qr",
        "id",
        "qdcount",
        "rcode",
        "qname",
        "qtype",
        "edns",
        "rd",
        "copy",
    ] {
        want += &format!("{f}\ttrue\n");
    }
    assert_eq!(out, want);
}

/// `string.lower` (Lua 5.4's is replaced by one that returns its argument
/// when nothing changes) lower-cases ASCII letters as the C locale does, and
/// nothing else; the expected strings are Python's `bytes.lower()` of the
/// same bytes.
#[test]
fn string_lower_maps_ascii_letters_only() {
    let out = run_on(
        "lower.lua",
        CAPTURE,
        "local s = 'already.lower.'\n\
         print(string.lower('WwW.CORPUS.TEST.'), string.lower(s), rawequal(string.lower(s), s))\n\
         print(string.lower(12), ('MiXeD-123_Z'):lower(), #string.lower(''))\n\
         print(string.byte(string.lower('\\200A\\255Z'), 1, -1))\n",
    );
    // Lua's escapes are decimal: \200 is 0xc8.
    let bytes: Vec<String> = b"\xc8A\xffZ"
        .to_ascii_lowercase()
        .iter()
        .map(|b| b.to_string())
        .collect();
    let want = format!(
        "www.corpus.test.\talready.lower.\ttrue\n12\tmixed-123_z\t0\n{}\n",
        bytes.join("\t")
    );
    assert_eq!(out, want);
}

/// A view `filter.lua` was handed is stale once its call returns: read in
/// the next call (the stage's function keeps it), it raises the stale-object
/// error, in a Lua chain and in a TOML pipeline (where the function is
/// called straight through the C API), pushed and pulled.
#[test]
fn a_view_kept_by_filter_lua_is_stale_in_the_next_call() {
    let messages = truth_messages().len();
    let out = run_on(
        "filter-stale.lua",
        CAPTURE,
        &format!(
            "{CHAIN}local kept, n, stale = nil, 0, 0\n\
             local function is_stale(ok, e) return not ok and string.find(e, 'stale object', 1, true) ~= nil end\n\
             local f = d.stage('filter.lua', function(o)\n\
               n = n + 1\n\
               if kept ~= nil and is_stale(pcall(function() return kept.frame end)) then stale = stale + 1 end\n\
               kept = o\n\
               return true\n\
             end)\n\
             input:receiver(layer):receiver(dns):receiver(f):receiver(d.stage('output.null'))\n\
             input:run()\n\
             print(n, stale, is_stale(pcall(function() return kept.dns end)))\n"
        ),
    );
    assert_eq!(out, format!("{messages}\t{}\ttrue\n", messages - 1));

    let dir = temp_dir("toml-lua-stale");
    let script = dir.join("keep.lua");
    // Passes an object only when the one before it is stale by now.
    std::fs::write(
        &script,
        "local kept\nfunction fresh(obj)\n\
         local pass = true\n\
         if kept ~= nil then\n\
           local ok, e = pcall(function() return kept.dns.qr end)\n\
           pass = not ok and string.find(e, 'stale object', 1, true) ~= nil\n\
         end\n\
         kept = obj\n\
         return pass\n\
         end\n",
    )
    .unwrap();
    let json = dir.join("out.jsonl");
    for drive in ["", "drive = \"pull\"\n"] {
        let pipeline = format!("{drive}{}", filter_lua_pipeline(&script, "fresh", &json));
        let out = run_pipeline(&pipeline, &["-q"]);
        assert_ok(&out, "dnsluice run");
        let lines = std::fs::read_to_string(&json).unwrap().lines().count();
        // The first object (nothing kept yet) and every later one (whose
        // predecessor was stale).
        assert_eq!(lines, messages, "{drive}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A view read with a key that is not a string is an error that says so
/// (a number is no field's name either), at the line that reads it.
#[test]
fn a_view_read_with_a_key_that_is_not_a_name_raises_a_clear_error() {
    let out = run_on(
        "badkey.lua",
        CAPTURE,
        &format!(
            "{CHAIN}dns:producer(layer:producer(input))\nlocal o = dns:produce()\n\
             local function try(f) print((select(2, pcall(f)))) end\n\
             try(function() return o[{{}}] end)\n\
             try(function() return o.dns[true] end)\n\
             try(function() return o[1] end)\n"
        ),
    );
    let fields = "(fields: frame ts";
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    // run_on gives the script's full path: the location ends with its name.
    assert!(
        lines[0].ends_with("/badkey.lua:8: object fields are named by strings"),
        "{out}"
    );
    assert!(
        lines[1].ends_with("/badkey.lua:9: object fields are named by strings"),
        "{out}"
    );
    assert!(
        lines[2].contains(&format!(
            "/badkey.lua:10: objects have no field `1` {fields}"
        )),
        "{out}"
    );
}
