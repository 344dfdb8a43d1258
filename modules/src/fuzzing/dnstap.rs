//! The `dnstap_file` target: a Frame Streams file of dnstap through
//! `input.dnstap`.

use super::capture::temp_path;
use crate::input::dnstap::{DnstapInput, DnstapOptions};
use dnsluice_core::wire::parse_layers;
use dnsluice_core::{Object, Producer};
use std::time::Duration;

/// `data` as a dnstap file (compressed ones too: the input looks at the
/// magic bytes) read by `input.dnstap`. It must end (an error is allowed
/// only for a compressed stream that does not decompress), every object
/// must be a DNS message inside its made-up packet, whose layers parse
/// to a payload that is the message (after its 2-byte length over TCP), and the counters must add up:
/// messages made = objects, and no more messages than frames.
pub fn dnstap_file(data: &[u8]) {
    let path = temp_path();
    std::fs::write(&path, data).expect("write the temp file");
    let options = DnstapOptions {
        path: Some(path.clone()),
        unix: None,
        tcp: None,
        connections: 0,
        idle_timeout: Duration::ZERO,
    };
    let mut input = match DnstapInput::open(options) {
        Ok(input) => input,
        Err(_) => {
            let _ = std::fs::remove_file(&path);
            return;
        }
    };
    let mut objects = 0u64;
    let ended = loop {
        match input.produce() {
            Ok(Some(Object::Dns(m))) => {
                objects += 1;
                let mut packet = *m.packet.get();
                packet.layers = parse_layers(packet.meta.link, packet.data, packet.meta.len);
                // UDP carries the message; a TCP segment its length first.
                let payload = packet.payload();
                let framed = payload.len() == m.bytes.len() + 2
                    && payload[..2] == (m.bytes.len() as u16).to_be_bytes();
                assert!(
                    !m.bytes.is_empty()
                        && (payload == m.bytes || (framed && &payload[2..] == m.bytes)),
                    "the message is not the made-up packet's payload: {:?}",
                    packet.layers
                );
            }
            Ok(Some(_)) => panic!("input.dnstap made an object that is not a DNS message"),
            Ok(None) => break true,
            Err(_) => break false,
        }
    };
    let _ = std::fs::remove_file(&path);
    if ended {
        assert!(matches!(input.produce(), Ok(None)), "produce after the end");
    }
    let mut stats = Vec::new();
    input.stats(&mut stats);
    let stats = &stats[0];
    assert_eq!(stats.output, objects, "{stats:?}");
    assert!(stats.output <= stats.input, "{stats:?}");
}
