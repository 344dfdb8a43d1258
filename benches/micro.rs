//! Micro benchmarks of the per-packet path: record walking, layer parsing,
//! and whole chains built statically (generics) and dynamically (boxed, as
//! TOML builds them).
//!
//!     cargo bench --bench micro
//!
//! Whole-process comparisons with dnsjit are in `benches/vs-dnsjit.sh`.

use divan::{black_box, Bencher};
use dnsluice::core::pipeline::Pipeline;
use dnsluice::core::wire::parse_layers;
use dnsluice::core::{drive, MapStage, Object, Producer};
use dnsluice::modules::filter::layer::Layer;
use dnsluice::modules::input::{fpcap, mmpcap};
use dnsluice::modules::output::null::Null;
use std::path::PathBuf;

fn main() {
    divan::main();
}

/// The bundled sample capture (1517 real packets: UDP and TCP, IPv4 and IPv6).
fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/data/sample.pcap")
}

const PACKETS: u64 = 1517;

#[divan::bench(name = "walk: mmpcap records")]
fn walk_mmpcap(b: Bencher) {
    b.counter(divan::counter::ItemsCount::new(PACKETS))
        .bench(|| {
            let mut reader = mmpcap::open(sample()).unwrap();
            let mut n = 0u64;
            while let Some(obj) = reader.produce().unwrap() {
                n += black_box(&obj).packet().map_or(0, |p| p.data.len() as u64);
            }
            n
        });
}

#[divan::bench(name = "walk: fpcap records")]
fn walk_fpcap(b: Bencher) {
    b.counter(divan::counter::ItemsCount::new(PACKETS))
        .bench(|| {
            let mut reader = fpcap::open(sample(), 1 << 20).unwrap();
            let mut n = 0u64;
            while let Some(obj) = reader.produce().unwrap() {
                n += black_box(&obj).packet().map_or(0, |p| p.data.len() as u64);
            }
            n
        });
}

/// The sample's packets, copied out once, with their link type and wire length.
fn packets() -> Vec<(dnsluice::core::LinkType, Vec<u8>, u32)> {
    let mut reader = mmpcap::open(sample()).unwrap();
    let mut out = Vec::new();
    while let Some(Object::Packet(p)) = reader.produce().unwrap() {
        out.push((p.meta.link, p.data.to_vec(), p.meta.len));
    }
    out
}

#[divan::bench(name = "parse: layers of every sample packet")]
fn parse(b: Bencher) {
    let packets = packets();
    b.counter(divan::counter::ItemsCount::new(packets.len()))
        .bench(|| {
            let mut sum = 0u32;
            for (link, data, len) in &packets {
                sum = sum.wrapping_add(black_box(parse_layers(*link, data, *len)).payload_len);
            }
            sum
        });
}

#[divan::bench(name = "chain: mmpcap → layer → null, static (generics)")]
fn chain_static(b: Bencher) {
    b.counter(divan::counter::ItemsCount::new(PACKETS))
        .bench(|| {
            let mut input = mmpcap::open(sample()).unwrap();
            let mut chain = MapStage::new(Layer::new(), Null::new());
            drive(&mut input, &mut chain, None).unwrap()
        });
}

#[divan::bench(name = "chain: mmpcap → layer → null, dynamic (TOML)")]
fn chain_dynamic(b: Bencher) {
    let text = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"output.null\"\n",
        sample().display()
    );
    let pipeline = Pipeline::parse("bench", &text).unwrap();
    let registry = dnsluice::modules::registry();
    b.counter(divan::counter::ItemsCount::new(PACKETS))
        .bench(|| pipeline.build(&registry).unwrap().run(None).unwrap());
}
