//! `output.null`: counts what it receives and discards it (for benchmarks and
//! for chains run only for their statistics).

use dnsluice_core::registry::{ModuleEntry, Parallel};
use dnsluice_core::{Object, Receiver, StageError, StageStats};

/// Counts objects and packets.
#[derive(Debug, Default)]
pub struct Null {
    objects: u64,
    payload_bytes: u64,
}

impl Null {
    /// A counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Objects received so far.
    pub fn count(&self) -> u64 {
        self.objects
    }
}

impl Receiver for Null {
    #[inline]
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        self.objects += 1;
        if let Some(p) = obj.packet() {
            self.payload_bytes += u64::from(p.layers.payload_len);
        }
        Ok(())
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new("output.null");
        stats.input = self.objects;
        stats.add_counter("payload_bytes", self.payload_bytes);
        out.push(stats);
    }
}

/// The registry entry (no options: any key is an error).
pub fn entry() -> ModuleEntry {
    ModuleEntry::output("output.null", "count objects and discard them", |(): ()| {
        Ok(Box::new(Null::new()))
    })
    .parallel(Parallel::Any)
}
