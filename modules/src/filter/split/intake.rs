//! The split's intake for a capture reader that pushes to it directly
//! ([`Split::try_take`]): the reader's walk adds each packet it reads to
//! its lane's batch in its own loop, without making an object of it and
//! without a call through the chain (`input/reader/push.rs`). What this
//! path cannot take (the first or last packet of a batch, the inline
//! lane's, a packet a glance does not place, one that does not fit an
//! entry) goes to [`Receiver::receive`](dnsluice_core::Receiver::receive)
//! as before.

use super::spread::{glance_v4_at, Glance};
use super::{By, Split};
use dnsluice_core::CaptureMeta;

impl Split {
    /// Adds the packet a capture reader just read (its bytes `data`, its
    /// capture facts `meta`; no packet made yet) to its lane's batch when
    /// that needs no call: its lane is told at a glance, the
    /// batch has begun, the packet is not the one that fills it, and it
    /// fits an entry. False, nothing taken, otherwise: then the reader
    /// hands it to [`Receiver::receive`](dnsluice_core::Receiver::receive).
    #[inline(always)]
    pub(crate) fn try_take(&mut self, data: &[u8], meta: &CaptureMeta) -> bool {
        let lane = match self.by {
            By::RoundRobin => self.next,
            By::Flow => match glance_v4_at(data, meta.link) {
                Glance::Alone => self.next,
                Glance::Flow(hash) => self.flow_lanes.lane(hash),
                Glance::Closer => return false,
            },
            By::Client => return false,
        };
        let key = self.input;
        let last = self.batch - 1;
        let Some(Some(batch)) = self.pending.get_mut(lane) else {
            return false;
        };
        let taken = batch.len() < last && batch.try_push_read(data, meta, key);
        if taken {
            self.input = key + 1;
        }
        taken
    }
}
