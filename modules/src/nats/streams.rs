//! The streams and the consumer dnsluice makes, with only fields that
//! nats-server 2.9 (Debian 12's) knows, and the message ids that make a
//! second copy of a work item or of a result a duplicate the server drops.

use async_nats::jetstream::{self, consumer, stream};
use std::time::Duration;

/// The header JetStream de-duplicates on.
pub const MSG_ID: &str = "Nats-Msg-Id";

/// How long the servers remember message ids by default: longer than a
/// worker's worst case between taking an item and a redelivery being
/// answered (`ack_wait` × `max_deliver`: 30 s × 5 by default). The server
/// keeps every id of the window in memory (about 100 bytes each).
pub const DEFAULT_DEDUP_WINDOW: Duration = Duration::from_secs(600);

/// A work-queue stream: a message stays until a worker acknowledges it; its
/// subject is its name; stored on `replicas` servers of a cluster.
pub fn work_stream(name: &str, dedup_window: Duration, replicas: usize) -> stream::Config {
    stream_config(
        name,
        stream::RetentionPolicy::WorkQueue,
        dedup_window,
        replicas,
    )
}

/// A results stream: keeps everything (limits retention, no limits), so
/// `queue get` can read it again; its subject is its name; stored on
/// `replicas` servers of a cluster.
pub fn results_stream(name: &str, dedup_window: Duration, replicas: usize) -> stream::Config {
    stream_config(
        name,
        stream::RetentionPolicy::Limits,
        dedup_window,
        replicas,
    )
}

fn stream_config(
    name: &str,
    retention: stream::RetentionPolicy,
    dedup_window: Duration,
    replicas: usize,
) -> stream::Config {
    stream::Config {
        name: name.to_string(),
        subjects: vec![name.to_string()],
        retention,
        storage: stream::StorageType::File,
        duplicate_window: dedup_window,
        num_replicas: replicas,
        ..Default::default()
    }
}

/// How workers share a work stream: one durable pull consumer.
#[derive(Clone, Debug)]
pub struct WorkConsumer {
    /// Its durable name: every worker naming it shares it.
    pub name: String,
    /// How long an item may stay unacknowledged before it goes to another worker.
    pub ack_wait: Duration,
    /// Deliveries of one item after which a worker gives up on it (an ERROR
    /// record for each line). The workers count, not the broker: see
    /// [`WorkConsumer::config`].
    pub max_deliver: i64,
    /// Unacknowledged items across all workers at most.
    pub max_ack_pending: i64,
}

impl WorkConsumer {
    /// The consumer's configuration. The broker is told no limit on
    /// deliveries: told the workers' `max_deliver`, it never delivered an
    /// item again once a worker holding its last delivery (the one that
    /// writes the ERROR records) died or handed it back, and the item was
    /// lost with no record at all.
    pub fn config(&self) -> consumer::pull::Config {
        consumer::pull::Config {
            durable_name: Some(self.name.clone()),
            ack_policy: consumer::AckPolicy::Explicit,
            deliver_policy: consumer::DeliverPolicy::All,
            ack_wait: self.ack_wait,
            max_deliver: -1,
            max_ack_pending: self.max_ack_pending,
            ..Default::default()
        }
    }
}

/// Finds stream `name`, or says that it does not exist (naming it) or why it
/// cannot be read.
pub async fn existing_stream(
    js: &jetstream::Context,
    name: &str,
) -> Result<jetstream::stream::Stream, String> {
    stream_appearing(js, name, Duration::ZERO).await
}

/// [`existing_stream`], waiting up to `limit` for a stream that does not
/// exist yet (a results stream is made by the first worker's first result).
pub async fn stream_appearing(
    js: &jetstream::Context,
    name: &str,
    limit: Duration,
) -> Result<jetstream::stream::Stream, String> {
    let start = std::time::Instant::now();
    loop {
        match js.get_stream(name).await {
            Ok(stream) => return Ok(stream),
            Err(e) if matches!(e.kind(), jetstream::context::GetStreamErrorKind::JetStream(j) if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND) =>
            {
                if start.elapsed() >= limit {
                    return Err(format!(
                        "no stream `{name}` on the broker (nothing was put there yet?)"
                    ));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => return Err(format!("cannot read stream `{name}`: {e}")),
        }
    }
}

/// The id of a work item made from line `number` (1-based) of a put: the
/// number and a digest of the text, so putting the same file again adds
/// nothing while another file's line `number` is a new item.
pub fn item_id(kind: char, number: u64, text: &str) -> String {
    format!("{kind}{number}-{:016x}", fnv1a(text.as_bytes()))
}

/// The id of the result of a work item: its stream and its own id (or,
/// for an item put without one, its stream sequence).
pub fn result_id(stream: &str, item_id: Option<&str>, sequence: u64) -> String {
    match item_id {
        Some(id) => format!("{stream}:{id}"),
        None => format!("{stream}:#{sequence}"),
    }
}

/// How many lines the stream's items hold, judging by its first one (1 for
/// an empty stream, or when it cannot be read).
pub async fn lines_per_item(stream: &jetstream::stream::Stream) -> usize {
    let first = stream.cached_info().state.first_sequence;
    match stream.get_raw_message(first).await {
        Ok(message) => item_lines(&String::from_utf8_lossy(&message.payload))
            .count()
            .max(1),
        Err(_) => 1,
    }
}

/// The lines of an item's text that are work (see [`is_work`]), trimmed.
pub fn item_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(str::trim).filter(|l| is_work(l))
}

/// Whether a trimmed line is work: not blank, not a `#` comment.
pub fn is_work(line: &str) -> bool {
    !line.is_empty() && !line.starts_with('#')
}

/// 64-bit FNV-1a: a stable digest (the same in every build and on every machine).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_distinguish_content() {
        // FNV-1a's published test vector: "a" → af63dc4c8601ec8c.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(item_id('L', 7, "a"), "L7-af63dc4c8601ec8c");
        assert_ne!(item_id('L', 7, "a"), item_id('L', 7, "b"));
        assert_eq!(result_id("W", Some("L7-x"), 9), "W:L7-x");
        assert_eq!(result_id("W", None, 9), "W:#9");
    }

    #[test]
    fn configs_say_what_the_design_needs() {
        let w = work_stream("WORK", DEFAULT_DEDUP_WINDOW, 3);
        assert_eq!(w.retention, stream::RetentionPolicy::WorkQueue);
        assert_eq!(w.num_replicas, 3);
        assert_eq!(w.subjects, vec!["WORK"]);
        let c = WorkConsumer {
            name: "workers".into(),
            ack_wait: Duration::from_secs(3),
            max_deliver: 4,
            max_ack_pending: 100,
        }
        .config();
        assert_eq!(c.ack_policy, consumer::AckPolicy::Explicit);
        // The workers give up after 4 deliveries; the broker never does.
        assert_eq!((c.max_deliver, c.max_ack_pending), (-1, 100));
    }
}
