//! What a [`crate::FaultServer`] does with each query, by the first label
//! of the name asked.

/// What a [`crate::FaultServer`] does with a query, chosen by the first label of
/// its name (`late300.example.` → `Late(300)`). Answers are A records
/// whatever the query type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// `ok`: NOERROR with A 192.0.2.1.
    Ok,
    /// `nx`: NXDOMAIN.
    NxDomain,
    /// `servfail`: SERVFAIL.
    ServFail,
    /// `refused`, and every name that matches nothing else: REFUSED.
    Refused,
    /// `drop`: never answers.
    Drop,
    /// `late<N>`: the `ok` answer after N ms (other queries are not held up).
    Late(u64),
    /// `wrongid`: the `ok` answer with id + 1, and nothing else.
    WrongId,
    /// `wrongq`: the `ok` answer with the right id for another name (the
    /// question's first letter changed), and nothing else.
    WrongQuestion,
    /// `tc`: over UDP, TC=1 and no answer; over TCP, TLS and HTTPS the `ok` answer.
    Truncated,
    /// `reset`: over TCP and TLS closes the connection at once (HTTPS: the
    /// whole HTTP/2 connection) without answering; over UDP like `drop`.
    Reset,
    /// `resetonce`: the first such query a server gets is a `reset`; every
    /// later one is answered like `ok`.
    ResetOnce,
    /// `garbage`: UDP: 3 random bytes; TCP/TLS: a 2-byte length prefix and 2
    /// junk bytes; HTTPS: a 200 response with 3 junk bytes.
    Garbage,
    /// `big`: 40 A records (192.0.2.1 ..= 192.0.2.40), about 700 bytes; over
    /// UDP, TC=1 and no answer when that exceeds 512 bytes or the query's
    /// EDNS size.
    Big,
    /// `okclose`: over TCP and TLS the `ok` answer, then the server closes
    /// the connection, which the client then holds idle and closed (as after
    /// a server's idle timeout); over UDP and HTTPS like `ok`.
    OkThenClose,
    /// `cname<N>` (N ≥ 1): a CNAME to `cname<N-1>` under the same parent,
    /// and nothing else, so a client must ask again for the target;
    /// `cname0` is answered like `ok`. `cname<N>` thus starts a chain of N
    /// CNAMEs that ends in the `ok` address.
    Cname(u32),
    /// `loopa` / `loopb`: a CNAME to `loopb` / `loopa` under the same
    /// parent (a loop that only shows across two queries).
    LoopA,
    /// See [`Behaviour::LoopA`].
    LoopB,
    /// `refusedtwice`: REFUSED, over UDP in two copies of one datagram (as
    /// a network that duplicates); over TCP, TLS and HTTPS once.
    RefusedTwice,
    /// `flip`: the `ok` answer the first time a server is asked the name
    /// (the whole name: `flip.1.example` and `flip.2.example` are two),
    /// NXDOMAIN every later time: an answer that changes when asked again.
    Flip,
}

impl Behaviour {
    /// The behaviour for a query whose name starts with `label` (lowercase).
    pub fn of(label: &str) -> Behaviour {
        match label {
            "ok" => Behaviour::Ok,
            "nx" => Behaviour::NxDomain,
            "servfail" => Behaviour::ServFail,
            "drop" => Behaviour::Drop,
            "wrongid" => Behaviour::WrongId,
            "wrongq" => Behaviour::WrongQuestion,
            "tc" => Behaviour::Truncated,
            "reset" => Behaviour::Reset,
            "resetonce" => Behaviour::ResetOnce,
            "garbage" => Behaviour::Garbage,
            "big" => Behaviour::Big,
            "okclose" => Behaviour::OkThenClose,
            "cname0" => Behaviour::Ok,
            "loopa" => Behaviour::LoopA,
            "loopb" => Behaviour::LoopB,
            "refusedtwice" => Behaviour::RefusedTwice,
            "flip" => Behaviour::Flip,
            _ => {
                let number = |prefix| label.strip_prefix(prefix).and_then(|n| n.parse().ok());
                if let Some(ms) = number("late") {
                    Behaviour::Late(ms)
                } else if let Some(hops) = number("cname") {
                    Behaviour::Cname(hops as u32)
                } else {
                    Behaviour::Refused
                }
            }
        }
    }
}
