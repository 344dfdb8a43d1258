//! dnstap files: a capture written as dnstap (`output.dnstap`) reads, in
//! the independent readers Debian ships (`dnstap-ldns`, `fstrm_dump`), as
//! tshark reads the capture: the same DNS messages, directions, ports and
//! question names. And a file with broken frames in it: every broken frame
//! is counted by kind, every good one is read, and the run succeeds.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use testkit::corpus::corpus_dir;
use testkit::{assert_ok, run_ok, run_pipeline, temp_path};

fn output(program: &str, args: &[&str], path: &Path) -> String {
    // spawns: dnstap-ldns fstrm_dump (the callers' `program`)
    let out = run_ok(Command::new(program).args(args).arg(path));
    String::from_utf8(out.stdout).unwrap() + &String::from_utf8_lossy(&out.stderr)
}

/// (response?, question name, source port, destination port) → how many.
type Messages = BTreeMap<(bool, String, u16, u16), usize>;

/// tshark's DNS messages of a capture (several in one TCP segment too).
fn tshark_messages(capture: &Path) -> Messages {
    let text = output(
        "tshark",
        &[
            "-n",
            "-Y",
            "dns",
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-E",
            "aggregator=;",
            "-e",
            "dns.flags.response",
            "-e",
            "dns.qry.name",
            "-e",
            "udp.port",
            "-e",
            "tcp.port",
            "-r",
        ],
        capture,
    );
    let mut out = Messages::new();
    for line in text.lines().filter(|l| !l.starts_with("Running as")) {
        let f: Vec<&str> = line.split('\t').collect();
        let ports: Vec<u16> = format!("{}{}", f[2], f[3])
            .split(';')
            .map(|p| p.parse().unwrap())
            .collect();
        let names: Vec<&str> = f[1].split(';').collect();
        for (i, qr) in f[0].split(';').enumerate() {
            let name = names
                .get(i)
                .filter(|n| !n.is_empty())
                .map_or(String::new(), |n| format!("{}.", n.to_lowercase()));
            *out.entry((qr == "1", name, ports[0], ports[1]))
                .or_insert(0) += 1;
        }
    }
    out
}

/// dnstap-ldns's messages of a dnstap file (its YAML form).
fn dnstap_ldns_messages(tap: &Path) -> Messages {
    let text = output("dnstap-ldns", &["-y", "-r"], tap);
    let mut out = Messages::new();
    for doc in text.split("\n---\n").filter(|d| d.contains("message:")) {
        // The message's own fields, indented under `message:`.
        let field = |key: &str| {
            doc.lines()
                .find_map(|l| l.strip_prefix(&format!("  {key}: ")))
                .map(|v| v.trim_matches('"').to_string())
        };
        let response = field("type").unwrap() == "CLIENT_RESPONSE";
        let query_port: u16 = field("query_port").unwrap().parse().unwrap();
        let response_port: u16 = field("response_port").unwrap().parse().unwrap();
        let (sport, dport) = if response {
            (response_port, query_port)
        } else {
            (query_port, response_port)
        };
        let mut lines = doc
            .lines()
            .skip_while(|l| !l.contains(";; QUESTION SECTION:"));
        let name = lines
            .nth(1)
            .and_then(|l| l.trim().strip_prefix(';'))
            .and_then(|l| l.split('\t').next())
            .map_or(String::new(), |n| n.to_lowercase());
        *out.entry((response, name, sport, dport)).or_insert(0) += 1;
    }
    out
}

/// Writes the DNS messages of `capture` as the dnstap file `tap`
/// (layer → dns → output.dnstap).
fn write_as_dnstap(capture: &Path, tap: &Path) {
    let text = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"output.dnstap\"\npath = \"{}\"\n",
        capture.display(),
        tap.display()
    );
    assert_ok(&run_pipeline(&text, &["-q"]), "dnsluice run");
}

#[test]
fn a_capture_as_dnstap_reads_in_dnstap_ldns_and_fstrm_dump_as_in_tshark() {
    let capture = corpus_dir().join("live_lo_en10mb.pcap");
    let tap = temp_path("capture.tap");
    write_as_dnstap(&capture, &tap);
    let want = tshark_messages(&capture);
    assert_eq!(want.values().sum::<usize>(), 6081);
    let got = dnstap_ldns_messages(&tap);
    let missing: Vec<_> = want
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .map(|(k, v)| (k, v, got.get(k)))
        .take(5)
        .collect();
    assert!(
        missing.is_empty() && got.len() == want.len(),
        "differ: {missing:?}"
    );
    let dump = output("fstrm_dump", &[], &tap);
    assert_eq!(
        dump.lines().filter(|l| l.starts_with("Data frame")).count(),
        6081
    );
    assert!(dump.contains("FSTRM_CONTROL_START") && dump.contains("FSTRM_CONTROL_STOP"));
    assert!(dump.contains("\"protobuf:dnstap.Dnstap\""));
}

#[test]
fn broken_frames_are_counted_by_kind_and_the_good_ones_read() {
    // Good frames: a capture's messages, written by us.
    let capture = corpus_dir().join("live_lo_en10mb.pcap");
    let good = temp_path("good.tap");
    write_as_dnstap(&capture, &good);
    let bytes = std::fs::read(&good).unwrap();
    // Split it into START, the data frames, STOP, by the lengths.
    let start_len = 8 + u32::from_be_bytes(bytes[4..8].try_into().unwrap()) as usize;
    let mut frames = Vec::new();
    let mut at = start_len;
    loop {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        frames.push(bytes[at..at + 4 + len].to_vec());
        at += 4 + len;
    }
    assert_eq!(frames.len(), 6081);
    let mut broken = bytes[..start_len].to_vec();
    for (i, frame) in frames.iter().enumerate() {
        broken.extend_from_slice(frame);
        match i {
            // Not protobuf.
            3 => broken.extend_from_slice(&[0, 0, 0, 3, 0xff, 0xff, 0xff]),
            // A control frame whose field claims more than the frame holds.
            7 => broken
                .extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 99]),
            // A dnstap message without its DNS message: type CLIENT_QUERY only.
            11 => broken.extend_from_slice(&[0, 0, 0, 6, 0x72, 2, 0x08, 5, 0x78, 1]),
            _ => {}
        }
    }
    // Cut inside a last frame.
    broken.extend_from_slice(&frames[0][..frames[0].len() / 2]);
    let path = temp_path("broken.tap");
    std::fs::write(&path, &broken).unwrap();
    let stats = temp_path("broken.json");
    let text = format!(
        "[[stage]]\nmodule = \"input.dnstap\"\npath = \"{}\"\n[[stage]]\nmodule = \"output.null\"\n",
        path.display()
    );
    let out = run_pipeline(&text, &["-q", "--stats-json", &stats.display().to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ok(&out, "dnsluice run");
    assert!(stderr.contains("file cut off"), "{stderr}");
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let input = &stats["stages"][0];
    assert_eq!(input["out"], 6081, "{input}");
    let errors = &input["errors"];
    assert_eq!(errors["bad_protobuf"], 1, "{errors}");
    assert_eq!(errors["bad_control_fields"], 1, "{errors}");
    assert_eq!(errors["no_dns_message"], 1, "{errors}");
    assert_eq!(errors["truncated_frame"], 1, "{errors}");
}

/// A dnstap file written by us, then zstd-compressed by `zstd` and cut in
/// its middle: the run says the zstd stream is cut off (where the cut falls
/// between two frames of the decompressed bytes, nothing else told) and how
/// many frames it read.
#[test]
fn a_compressed_dnstap_file_cut_off_says_so() {
    let tap = temp_path("whole.tap");
    write_as_dnstap(&corpus_dir().join("live_lo_en10mb.pcap"), &tap);
    let packed = temp_path("whole.tap.zst");
    run_ok(
        Command::new("zstd")
            .arg("-q")
            .arg("-f")
            .arg(&tap)
            .arg("-o")
            .arg(&packed),
    );
    let bytes = std::fs::read(&packed).unwrap();
    let cut = temp_path("cut.tap.zst");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let text = format!(
        "[[stage]]\nmodule = \"input.dnstap\"\npath = \"{}\"\n[[stage]]\nmodule = \"output.null\"\n",
        cut.display()
    );
    let out = run_pipeline(&text, &["-q"]);
    assert_ok(&out, "dnsluice run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("file cut off") && stderr.contains("the zstd stream is cut off after"),
        "{stderr}"
    );
}

/// A dnstap file whose writer was stopped between two frames: every frame is
/// whole, but the STOP control frame that ends a Frame Streams stream is
/// missing. The run reads every message and says the file was not finished.
#[test]
fn a_dnstap_file_without_its_stop_frame_says_so() {
    let tap = temp_path("whole-for-stop.tap");
    write_as_dnstap(&corpus_dir().join("live_lo_en10mb.pcap"), &tap);
    let bytes = std::fs::read(&tap).unwrap();
    // Frame Streams' STOP: an escape (length 0), the control frame's length
    // (4), its type (3, STOP), and nothing else.
    let stop = [0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 3];
    assert!(
        bytes.ends_with(&stop),
        "the writer ends its stream with STOP"
    );
    let cut = temp_path("unstopped.tap");
    std::fs::write(&cut, &bytes[..bytes.len() - stop.len()]).unwrap();
    let read = |path: &Path| {
        let stats = temp_path("unstopped.json");
        let text = format!(
            "[[stage]]\nmodule = \"input.dnstap\"\npath = \"{}\"\n[[stage]]\nmodule = \"output.null\"\n",
            path.display()
        );
        let out = run_pipeline(&text, &["-q", "--stats-json", &stats.display().to_string()]);
        assert_ok(&out, "dnsluice run");
        let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (stats["stages"][0]["out"].clone(), stderr)
    };
    let (whole_out, whole_stderr) = read(&tap);
    assert_eq!(whole_out, 6081);
    assert!(!whole_stderr.contains("STOP"), "{whole_stderr}");
    let (out, stderr) = read(&cut);
    assert_eq!(out, 6081, "every message is still read");
    assert!(
        stderr.contains("file cut off: it ends without the STOP frame")
            && stderr.contains("the 6081 frames before it were read"),
        "{stderr}"
    );
}
