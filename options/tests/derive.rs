//! What `#[derive(Options)]` and `#[derive(Choice)]` generate.

use dnsluice_options::{Choice, ChoiceValue, DefaultDoc, Options, Shape};
use std::path::PathBuf;
use std::time::Duration;

/// Certificates.
#[derive(Options, Debug, Default, PartialEq)]
struct Tls {
    /// CA certificates to trust.
    ca_file: Option<PathBuf>,
    /// Do not verify.
    #[option(default)]
    insecure: bool,
}

/// How objects are spread.
#[derive(Choice, Clone, Copy, Debug, PartialEq, Eq)]
enum By {
    /// One after the other.
    RoundRobin,
    /// By the client's address.
    #[choice(name = "client", alias = "source")]
    ByClient,
}

#[derive(Options, Debug, PartialEq)]
#[options(hint(responses = "put an output stage after this one"))]
struct Client {
    /// The server.
    ///
    /// An address and a port.
    server: String,
    /// How long to wait.
    #[option(default = Duration::from_secs(2))]
    timeout: Duration,
    /// Workers.
    #[option(default = 4, range = 1..=64)]
    workers: u32,
    /// The record type.
    #[option(rename = "type", default = "A".to_string())]
    qtype: String,
    /// Ports.
    #[option(default = vec![53])]
    ports: Vec<u16>,
    /// Spreading.
    #[option(default = By::RoundRobin)]
    by: By,
    /// A limit, when given.
    #[option(range = 1..=10)]
    limit: Option<u8>,
    #[option(flatten)]
    tls: Tls,
}

fn parse(text: &str) -> Result<Client, dnsluice_options::OptionError> {
    Client::from_table(toml::from_str(text).unwrap())
}

#[test]
fn defaults_fill_what_is_absent() {
    let c = parse("server = \"127.0.0.1:53\"").unwrap();
    assert_eq!(
        c,
        Client {
            server: "127.0.0.1:53".into(),
            timeout: Duration::from_secs(2),
            workers: 4,
            qtype: "A".into(),
            ports: vec![53],
            by: By::RoundRobin,
            limit: None,
            tls: Tls::default(),
        }
    );
}

#[test]
fn every_key_is_read_including_the_flattened_group() {
    let c = parse(
        "server = \"x\"\ntimeout = \"150ms\"\nworkers = 64\ntype = \"MX\"\nports = [53, 5353]\n\
         by = \"CLIENT\"\nlimit = 3\nca_file = \"ca.pem\"\ninsecure = true",
    )
    .unwrap();
    assert_eq!(c.timeout, Duration::from_millis(150));
    assert_eq!((c.workers, c.qtype.as_str()), (64, "MX"));
    assert_eq!(c.ports, vec![53, 5353]);
    assert_eq!(c.by, By::ByClient);
    assert_eq!(c.limit, Some(3));
    assert_eq!(
        c.tls,
        Tls {
            ca_file: Some("ca.pem".into()),
            insecure: true
        }
    );
}

#[test]
fn unknown_keys_are_errors_even_beside_a_flattened_group() {
    let e = parse("server = \"x\"\nca_fiel = \"ca.pem\"").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("ca_fiel"));
    assert!(
        e.message
            .starts_with("unknown option; did you mean `ca_file`?"),
        "{e}"
    );
    let e = parse("server = \"x\"\nresponses = \"r.json\"").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("responses"));
    assert_eq!(e.message, "put an output stage after this one");
    let e = parse("server = \"x\"\nzzz = 1").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("zzz"));
    assert!(
        e.message
            .starts_with("unknown option (options: server, timeout,"),
        "{e}"
    );
}

#[test]
fn wrong_values_name_their_key() {
    let cases = [
        ("", "server", "is required"),
        ("server = 1", "server", "expected a string, found integer 1"),
        (
            "server = \"x\"\nworkers = 0",
            "workers",
            "must be from 1 to 64 (is 0)",
        ),
        (
            "server = \"x\"\nlimit = 11",
            "limit",
            "must be from 1 to 10 (is 11)",
        ),
        (
            "server = \"x\"\ntimeout = 3000",
            "timeout",
            "3000 has no unit: write e.g. \"3000ms\" or \"3000s\"",
        ),
        (
            "server = \"x\"\nby = \"hash\"",
            "by",
            "`hash` is not one of round-robin, client",
        ),
        (
            "server = \"x\"\nports = [53, \"x\"]",
            "ports",
            "item 2: expected an integer, found the string \"x\"",
        ),
    ];
    for (text, key, message) in cases {
        let e = parse(text).unwrap_err();
        assert_eq!(
            (e.key.as_deref(), e.message.as_str()),
            (Some(key), message),
            "{text}"
        );
    }
}

#[test]
fn docs_come_from_the_declaration() {
    let docs = Client::docs();
    let keys: Vec<&str> = docs.iter().map(|d| d.key).collect();
    assert_eq!(
        keys,
        ["server", "timeout", "workers", "type", "ports", "by", "limit", "ca_file", "insecure"]
    );
    let server = &docs[0];
    assert_eq!(
        (server.help, server.details),
        ("The server.", "An address and a port.")
    );
    assert_eq!(server.default, DefaultDoc::Required);
    assert_eq!(docs[1].shape, Shape::Duration);
    assert_eq!(docs[1].default.text(), "\"2s\"");
    assert_eq!(docs[2].range_text(), "1 to 64");
    assert_eq!(docs[4].shape.to_string(), "list of integer");
    assert_eq!(docs[4].default.text(), "[53]");
    assert_eq!(docs[5].shape.to_string(), "round-robin | client");
    assert_eq!(docs[6].default, DefaultDoc::Unset);
    assert_eq!(docs[7].shape, Shape::Path);
    assert_eq!(docs[8].default.text(), "false");
    assert_eq!(docs[3].flag(), "--type");
    assert_eq!(docs[7].flag(), "--ca-file");
}

#[test]
fn choices_read_and_print_their_names() {
    assert_eq!("round-robin".parse::<By>(), Ok(By::RoundRobin));
    assert_eq!(By::ByClient.to_string(), "client");
    assert_eq!(By::ALL.len(), 2);
    assert_eq!("Source".parse::<By>(), Ok(By::ByClient));
}
