//! A dnsluice binary with one extra module, `filter.count-by-source`, written
//! here, outside the engine and its built-in modules.
//!
//! Adding a module takes three things:
//! 1. a type that does the work (here a [`Map`]: look at each packet, pass it on);
//! 2. its options, one struct deriving [`Options`] (the doc comments are the
//!    options' documentation in `dnsluice modules`, the field types and
//!    `#[option(...)]` attributes their parser), and a registry entry: its
//!    dotted name, a summary, its constructor;
//! 3. a `main` that adds the entry to the built-in registry and runs the CLI.
//!
//! Then any pipeline can use it by name (see `pipeline.toml` beside this file):
//!
//! ```text
//! cargo run -p dnsluice-example-custom-module -- run examples/custom-module/pipeline.toml
//! ```

use dnsluice::core::options::Options;
use dnsluice::core::registry::ModuleEntry;
use dnsluice::core::{Map, Object, StageStats};
use std::collections::HashMap;
use std::net::IpAddr;

/// Options of `filter.count-by-source`, checked like any built-in module's.
#[derive(Debug, Options)]
struct CountOptions {
    /// How many of the busiest source addresses to report.
    #[option(default = 10, range = 1..=1_000_000)]
    top: usize,
}

/// Counts packets per source IP address; reports the busiest at the end.
struct CountBySource {
    top: usize,
    counts: HashMap<IpAddr, u64>,
}

impl Map for CountBySource {
    fn map(&mut self, obj: &mut Object<'_>) {
        if let Some(source) = obj.packet().and_then(|p| p.src()) {
            *self.counts.entry(source).or_default() += 1;
        }
    }

    fn stats(&self) -> StageStats {
        let mut stats = StageStats::new("filter.count-by-source");
        let mut busiest: Vec<_> = self.counts.iter().collect();
        busiest.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (source, n) in busiest.into_iter().take(self.top) {
            stats.add_counter(&format!("src {source}"), *n);
        }
        stats
    }
}

/// The registry entry: the same shape every built-in module has.
fn entry() -> ModuleEntry {
    ModuleEntry::map(
        "filter.count-by-source",
        "count packets per source IP address (example of a module added outside the engine)",
        |options: CountOptions| {
            Ok(CountBySource {
                top: options.top,
                counts: HashMap::new(),
            })
        },
    )
}

fn main() -> std::process::ExitCode {
    let mut registry = dnsluice::modules::registry();
    registry.add(entry());
    dnsluice::cli::main(registry)
}
