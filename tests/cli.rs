//! The command line as a user meets it: pipelines, overrides, errors, summaries.

use serde_json::Value;
use std::io::Write;
use std::process::Stdio;
use testkit::corpus::{corpus_dir, truth};
use testkit::pipeline::layer_json;
use testkit::{assert_ok, dnsluice, run_ok, run_pipeline, temp_dir, temp_path};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn pipeline(input: &str, path: &str, output: &str) -> String {
    format!("[[stage]]\nmodule = \"{input}\"\npath = \"{path}\"\n\n[[stage]]\nmodule = \"filter.layer\"\n\n[[stage]]\nmodule = \"{output}\"\n")
}

#[test]
fn cut_off_files_warn_with_offset_and_keep_every_complete_record() {
    for file in ["truncated_record_header.pcap", "truncated_record_data.pcap"] {
        let capture = corpus_dir().join(file);
        // The truth file's own container parse: the bytes after the last complete record.
        let truth = truth(file);
        let trailing = truth["container"]["trailing_bytes"].as_u64().unwrap();
        let offset = truth["size_bytes"].as_u64().unwrap() - trailing;
        for input in ["input.mmpcap", "input.fpcap"] {
            let (rows, out) = layer_json(input, &capture);
            assert_ok(&out, format_args!("{input} {file}"));
            assert_eq!(rows.len(), 10, "{input} {file}: the 10 complete records");
            let err = stderr(&out);
            assert!(err.contains("warning") && err.contains(file), "{err}");
            assert!(
                err.contains(&format!(
                    "the {trailing} bytes from byte offset {offset} are an incomplete record or block"
                )),
                "{input}: {err}"
            );
        }
    }
}

#[test]
fn a_file_that_is_not_a_capture_is_a_clear_error() {
    let text = temp_path("notes.txt");
    std::fs::write(&text, "these are not packets, just some text\n").unwrap();
    let empty = temp_path("empty.pcap");
    std::fs::write(&empty, "").unwrap();
    for input in ["input.mmpcap", "input.fpcap"] {
        let out = run_pipeline(
            &pipeline(input, &text.display().to_string(), "output.null"),
            &[],
        );
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(
            err.contains("not a pcap or pcapng file") && err.contains("notes.txt"),
            "{err}"
        );
        let out = run_pipeline(
            &pipeline(input, &empty.display().to_string(), "output.null"),
            &[],
        );
        assert!(!out.status.success());
        assert!(stderr(&out).contains("empty file"), "{}", stderr(&out));
        let dir = corpus_dir();
        let out = run_pipeline(
            &pipeline(input, &dir.display().to_string(), "output.null"),
            &[],
        );
        assert!(!out.status.success());
        assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));
        let out = run_pipeline(&pipeline(input, "/nonexistent/x.pcap", "output.null"), &[]);
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("/nonexistent/x.pcap"),
            "{}",
            stderr(&out)
        );
    }
}

/// Runs a pipeline text that must fail; returns stderr.
fn config_error(text: &str) -> String {
    let out = run_pipeline(text, &[]);
    assert!(!out.status.success(), "should fail: {text}");
    stderr(&out)
}

#[test]
fn config_errors_name_file_line_and_key() {
    let err = config_error("[[stage]]\nmodule = \"input.mmpcap\"\npath = \"x.pcap\"\nspeed = 3\n[[stage]]\nmodule = \"output.null\"\n");
    assert!(err.contains("pipeline.toml:4: key `speed`"), "{err}");
    assert!(
        err.contains("unknown option") && err.contains("path, helper"),
        "lists valid keys: {err}"
    );

    let err = config_error(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = 3\n[[stage]]\nmodule = \"output.null\"\n",
    );
    assert!(err.contains("pipeline.toml:3: key `path`"), "{err}");

    let err =
        config_error("[[stage]]\nmodule = \"input.mmpcap\"\n[[stage]]\nmodule = \"output.null\"\n");
    assert!(
        err.contains("pipeline.toml:2: key `path`") && err.contains("is required"),
        "{err}"
    );

    let err =
        config_error("[[stage]]\nmodule = \"input.nope\"\n[[stage]]\nmodule = \"output.null\"\n");
    assert!(
        err.contains("pipeline.toml:2") && err.contains("unknown module `input.nope`"),
        "{err}"
    );
    assert!(
        err.contains("input.mmpcap") && err.contains("output.json"),
        "lists modules: {err}"
    );

    let err =
        config_error("[[stage]]\nmodule = \"output.null\"\n[[stage]]\nmodule = \"output.null\"\n");
    assert!(err.contains("must be an input"), "{err}");

    let err = config_error("[[stage]]\nmodule = \"input.mmpcap\"\npath = \"x\"\n[[stage]]\nmodule = \"filter.layer\"\n");
    assert!(err.contains("must be an output"), "{err}");

    let err = config_error("[[stage]]\nmodule = \"input.mmpcap\"\npath = \"x\"\n\n[[stage]\nmodule = \"output.null\"\n");
    assert!(err.contains("pipeline.toml:5"), "syntax error line: {err}");

    let err = config_error("[[stage]]\nmodule = \"input.fpcap\"\npath = \"x\"\nbuffer_kib = 0\n[[stage]]\nmodule = \"output.null\"\n");
    assert!(
        err.contains("pipeline.toml:4: key `buffer_kib`") && err.contains("from 1 to"),
        "{err}"
    );

    let err = config_error("[[stage]]\nmodule = \"input.mmpcap\"\npath = \"x\"\n[[stage]]\nmodule = \"filter.layer\"\ndepth = 2\n[[stage]]\nmodule = \"output.null\"\n");
    assert!(err.contains("pipeline.toml:6: key `depth`"), "{err}");
}

#[test]
fn set_overrides_stage_options_and_modules() {
    let capture = corpus_dir().join("vlan_qinq.pcap");
    let stats = temp_path("stats.json");
    let out = run_pipeline(
        &pipeline("input.mmpcap", "does-not-exist.pcap", "output.null"),
        &[
            "--set",
            &format!("0.path={}", capture.display()),
            "--set",
            "0.module=input.fpcap",
            "--stats-json",
            &stats.display().to_string(),
        ],
    );
    assert_ok(&out, "dnsluice run");
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(stats["stages"][0]["module"], "input.fpcap");
    assert_eq!(stats["stages"][0]["out"], 22);
    let out = run_pipeline(
        &pipeline("input.mmpcap", "x", "output.null"),
        &["--set", "9.path=y"],
    );
    assert!(
        stderr(&out).contains("stage 9 does not exist"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn stats_json_has_every_stage_with_counts_and_errors() {
    let stats = temp_path("stats.json");
    let capture = corpus_dir().join("malformed.pcap");
    let out = run_pipeline(
        &pipeline(
            "input.mmpcap",
            &capture.display().to_string(),
            "output.null",
        ),
        &["--stats-json", &stats.display().to_string()],
    );
    assert_ok(&out, "dnsluice run");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let modules: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["module"].as_str().unwrap())
        .collect();
    assert_eq!(modules, ["input.mmpcap", "filter.layer", "output.null"]);
    for stage in v["stages"].as_array().unwrap() {
        // Every stage has the whole contract, typed.
        let keys: Vec<&str> = stage
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for key in ["module", "in", "out", "errors", "counters", "warnings"] {
            assert!(keys.contains(&key), "`{key}` missing: {stage}");
        }
        assert!(stage["module"].is_string(), "{stage}");
        assert!(stage["in"].is_u64() && stage["out"].is_u64(), "{stage}");
        for map in ["errors", "counters"] {
            let map = stage[map].as_object().unwrap_or_else(|| panic!("{stage}"));
            assert!(map.values().all(Value::is_u64), "{stage}");
        }
        let warnings = stage["warnings"]
            .as_array()
            .unwrap_or_else(|| panic!("{stage}"));
        assert!(warnings.iter().all(Value::is_string), "{stage}");
        assert_eq!(stage["in"], 34, "{stage}");
    }
    // The reader's 34 records go on to the layer filter, and all of them on to the output.
    assert_eq!(v["stages"][0]["out"], 34);
    assert_eq!(v["stages"][1]["out"], 34);
    // malformed.pcap's frames 2, 5 and 32 carry a bad IPv4 total length, a bad UDP
    // length and IHL=4 (corpus README, generator_frames).
    let errors = &v["stages"][1]["errors"];
    assert_eq!(errors["bad_ipv4_total_length"], 1, "{errors}");
    assert_eq!(errors["bad_udp_length"], 1, "{errors}");
    assert_eq!(errors["bad_ipv4_header_length"], 1, "{errors}");
    assert!(v["elapsed_s"].is_f64(), "{v}");
    // The human summary on stderr has the same stages.
    let err = stderr(&out);
    assert!(
        err.contains("filter.layer") && err.contains("bad_udp_length=1"),
        "{err}"
    );
}

#[test]
fn stdin_input_reads_a_piped_capture() {
    let capture = corpus_dir().join("live_mini.pcapng");
    let text =
        "[[stage]]\nmodule = \"input.fpcap\"\npath = \"-\"\n[[stage]]\nmodule = \"output.null\"\n";
    let file = temp_path("stdin.toml");
    std::fs::write(&file, text).unwrap();
    let stats = temp_path("stats.json");
    let mut child = dnsluice()
        .args([
            "run",
            &file.display().to_string(),
            "--stats-json",
            &stats.display().to_string(),
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(&capture).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_ok(&out, "dnsluice");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(v["stages"][1]["in"], 1517, "tshark counts 1517 records");
}

#[test]
fn pull_driven_chain_gives_the_same_output_as_push() {
    let capture = corpus_dir()
        .join("live_mini_en10mb.pcap")
        .display()
        .to_string();
    let push = run_pipeline(&pipeline("input.mmpcap", &capture, "output.json"), &["-q"]);
    let pull = run_pipeline(
        &format!(
            "drive = \"pull\"\n{}",
            pipeline("input.mmpcap", &capture, "output.json")
        ),
        &["-q"],
    );
    assert_ok(&push, "push");
    assert_ok(&pull, "pull");
    assert_eq!(push.stdout.iter().filter(|b| **b == b'\n').count(), 1517);
    assert_eq!(push.stdout, pull.stdout);
}

#[test]
fn modules_lists_every_module_with_options() {
    let out = dnsluice().arg("modules").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "input.mmpcap",
        "input.fpcap",
        "filter.layer",
        "output.null",
        "output.json",
    ] {
        assert!(text.contains(name), "{name} in {text}");
    }
    assert!(
        text.contains("buffer_kib") && text.contains("default 1024"),
        "{text}"
    );
    assert!(text.contains("required"), "{text}");
}

#[test]
fn quickstart_runs_on_the_bundled_sample() {
    let out = run_ok(dnsluice().current_dir(env!("CARGO_MANIFEST_DIR")).args([
        "run",
        "configs/quickstart.toml",
        "-q",
    ]));
    let first: Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    // Frame 1 of live_mini_en10mb.pcap per its truth file: 127.0.0.1:59035 → 127.0.0.1:53 over UDP.
    assert_eq!(first["frame"], 1);
    assert_eq!(
        (
            first["src"].as_str(),
            first["sport"].as_u64(),
            first["dport"].as_u64()
        ),
        (Some("127.0.0.1"), Some(59035), Some(53))
    );
}

#[test]
fn closed_stdout_ends_quietly() {
    let capture = corpus_dir()
        .join("live_lo_en10mb.pcap")
        .display()
        .to_string();
    let file = temp_path("pipe.toml");
    std::fs::write(&file, pipeline("input.mmpcap", &capture, "output.json")).unwrap();
    let mut child = dnsluice()
        .args(["run", &file.display().to_string(), "-q"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away at once
    let out = child.wait_with_output().unwrap();
    assert_ok(&out, "dnsluice");
    assert!(!stderr(&out).contains("error"), "{}", stderr(&out));
}

#[test]
fn an_error_inside_a_list_option_names_its_line_and_key() {
    let text = "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"x\"\n\n[[stage]]\nmodule = \"filter.dns\"\nkeep_non_dns = true\nports = [53, \"x\"]\n\n[[stage]]\nmodule = \"output.null\"\n";
    let err = config_error(text);
    assert!(err.contains("pipeline.toml:8: key `ports`"), "{err}");
    let err =
        config_error("[[stage]]\nmodule = \"output.null\"\n[[stage]]\nmodule = \"output.null\"\n");
    assert!(
        err.contains("is an output module, but stage 0 must be an input"),
        "{err}"
    );
    let err = config_error(
        "[[stage]]\nmodule = \"input.fpcap\"\npath = \"x\"\n[[stage]]\nmodule = \"filter.dns\"\n",
    );
    assert!(
        err.contains("is a filter module, but stage 1 must be an output"),
        "{err}"
    );
}

#[test]
fn a_bad_value_given_with_set_is_blamed_on_set() {
    let capture = corpus_dir().join("vlan_qinq.pcap");
    let out = run_pipeline(
        &pipeline("input.fpcap", &capture.display().to_string(), "output.null"),
        &["--set", "0.buffer_kib=lots"],
    );
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("--set: key `0.buffer_kib`") && err.contains("expected an integer"),
        "{err}"
    );
}

#[test]
fn paths_in_a_pipeline_file_are_relative_to_it_and_set_paths_to_the_working_directory() {
    // From a directory that is not the repository, by absolute path.
    let elsewhere = temp_dir("cwd");
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/quickstart.toml");
    let out = run_ok(
        dnsluice()
            .current_dir(&elsewhere)
            .args(["run", config, "-q"]),
    );
    // The bundled sample (live_mini_en10mb.pcap) has 1517 packets, one JSON line each.
    assert_eq!(out.stdout.iter().filter(|b| **b == b'\n').count(), 1517);

    // An output path in the file lands beside the file, not in the working directory.
    let dir = temp_dir("configdir");
    let capture = corpus_dir().join("vlan_qinq.pcap");
    std::fs::write(
        dir.join("p.toml"),
        format!(
            "[[stage]]\nmodule = \"input.fpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"output.json\"\npath = \"out.json\"\n",
            capture.display()
        ),
    )
    .unwrap();
    run_ok(
        dnsluice()
            .current_dir(&elsewhere)
            .arg("run")
            .arg(dir.join("p.toml")),
    );
    assert!(dir.join("out.json").exists() && !elsewhere.join("out.json").exists());

    // `--set` paths stay relative to the working directory.
    run_ok(
        dnsluice()
            .current_dir(&elsewhere)
            .arg("run")
            .arg(dir.join("p.toml"))
            .args(["--set", "1.path=set.json"]),
    );
    assert!(elsewhere.join("set.json").exists() && !dir.join("set.json").exists());
}

#[test]
fn an_unknown_key_is_reported_before_the_roles_are_checked() {
    // The only stage, with a typo: the typo is the error, not "needs an output".
    let err = config_error("[[stage]]\nmodule = \"input.mmpcap\"\npaht = \"x.pcap\"\n");
    assert!(err.contains("pipeline.toml:3: key `paht`"), "{err}");
    assert!(err.contains("did you mean `path`?"), "{err}");
}

/// Absurd durations on the command line are usage errors naming the bound,
/// not panics (exit status 101: a float out of Duration's range, an instant
/// past the clock's end).
#[test]
fn absurd_durations_are_refused_not_a_panic() {
    let names = temp_path("absurd-names.txt");
    std::fs::write(&names, "a.example\n").unwrap();
    let jsonl = temp_path("absurd.jsonl");
    let huge = "10000000000000000000s";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "queue",
                "get",
                "nats://127.0.0.1:1/R",
                "--idle-exit",
                "1e300",
            ],
            "over a year",
        ),
        (
            vec![
                "lookup",
                "--name-servers",
                "127.0.0.1:9",
                "--stats-interval",
                huge,
                "--stats-jsonl",
                jsonl.to_str().unwrap(),
                "--input",
                names.to_str().unwrap(),
            ],
            "at most 1 day",
        ),
        (
            vec![
                "lookup",
                "--name-servers",
                "127.0.0.1:9",
                "--metrics-linger",
                huge,
                "--input",
                names.to_str().unwrap(),
            ],
            "at most 1 day",
        ),
    ];
    for (args, said) in cases {
        let out = dnsluice().args(&args).output().unwrap();
        let err = stderr(&out);
        // A usage error (2) or an error of the run (1), never a panic (101).
        assert!(
            matches!(out.status.code(), Some(1 | 2)),
            "{args:?}: {:?} {err}",
            out.status.code()
        );
        assert!(err.contains(said), "{args:?}: {err}");
    }
}
