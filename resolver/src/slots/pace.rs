//! How fast one nameserver is asked: a token bucket whose rate adapts to
//! what the nameserver does with the queries (additive increase,
//! multiplicative decrease, as TCP does), under the user's caps.
//!
//! Time is cut into rounds as long as it takes to see a query lost (the
//! nameserver's wait for an answer, at least two round trips; 20 ms to
//! 1 s; half that in slow start), so a cut answers what the last rate did,
//! not an older one. In each
//! round the nameserver's queries end as *good* (an answer), *lost* (no
//! answer in time) or *refused* (REFUSED, SERVFAIL, or TC=1 over UDP: what
//! a loaded or rate-limiting server sends). Refusals count against the
//! nameserver only above its usual share: the least share of the last
//! [`HISTORY`] rounds (a server that refuses some names on policy refuses
//! them in every round, and after a cut a limiter refuses none), from the
//! third round on. At the end
//! of a round:
//!
//! - when more than [`LOSS_HIGH`] of the round was bad (lost, or refused
//!   above the usual share), at least [`MIN_BAD`] events: the rate is cut
//!   to what was delivered, at least by 15 % and at most by half, and slow
//!   start is over. One cut per flight, as TCP cuts once per window: the
//!   losses and refusals of queries sent before the last cut do not count
//!   (that cut already answered them; a loss is seen a whole wait after
//!   its query left, so they would cut the rate again for what it no
//!   longer is);
//! - a loss whose answer comes after all (a wait too short for a moment
//!   when the machine or the path stalled) is taken back: from its round
//!   when it was counted there, and when it helped a cut, the cut is
//!   undone once late answers come for more than half of the losses that
//!   made it (as TCP undoes a cut on a spurious timeout, RFC 3522): a
//!   host that stalls for a tenth of a second otherwise halves the rate
//!   and takes seconds to win it back;
//! - in slow start, when the round was held back by the rate and brought
//!   fewer answers (refusals included) than [`ANSWERED_SHARE`] of the
//!   queries sent in the round before (a slow-start round lasts at least
//!   a round trip, so those answers are all due): the path delivers no
//!   more (a limiter drops the rest, a server queues it), so slow start
//!   ends at the rate of good answers, or half the rate when that is
//!   more. Only a round whose sends grew by half on the last one's
//!   counts: a sender slower than its rate (a loaded machine wakes late,
//!   and its answers are read late too) is not a path that stopped
//!   answering. A loss is only seen a wait (at least 100 ms)
//!   after its query left, two or three rounds of doubling later: behind a
//!   limiter of 2,000 queries/s that drops, slow start once reached 32,000
//!   and lost 4,000 queries before the first cut, whose names then lost
//!   their retries in the cuts' cascade and ended the run seconds late;
//! - otherwise, when the round's answers took longer on average than in
//!   the quickest of the last rounds by more than [`QUEUE_DELAY`] (or a
//!   thirty-second of that round trip, the noise of a long path): a queue
//!   builds at the server before it overflows, so slow start ends, or
//!   after it the rate eases by 5 % (a server's socket buffer holds a few
//!   milliseconds of queries: this keeps it from dropping them). Only a
//!   round of at least [`QUEUE_SAMPLES`] answers is weighed, and its mean
//!   must stand out by three of its standard errors too: a few jittery
//!   answers make a noisy mean, whose lucky low rounds once read every
//!   other round as a queue, so that a rate cut low (a loaded machine, a
//!   burst of losses) eased as fast as it grew and stayed at tens of
//!   queries a second;
//! - otherwise, when the round ran short of tokens (there was work the rate
//!   held back: the rate, not the work, was the limit), the rate doubles in
//!   slow start, else grows by a twentieth of the rate at the last cut (a
//!   sixteenth of the rate, when that is more);
//! - a round that had tokens to spare leaves the rate as it is (an idle
//!   link proves nothing about a faster one).
//!
//! Random loss of a few percent (a lossy path) stays under the threshold and
//! costs no speed; a server's limiter, which drops or refuses everything
//! above its rate, gets a sawtooth just above that rate, whose excess is
//! retried. Plain data, no clock of its own: the caller passes `now`.

use std::time::{Duration, Instant};

/// The share of bad events in a round above which the rate is cut.
pub const LOSS_HIGH: f64 = 0.05;
/// Bad events a round needs before it can cut the rate (a few random losses
/// in a small round are not congestion).
pub const MIN_BAD: u32 = 3;
/// In slow start, the share of the last round's queries a round must
/// answer for the rate to double again (BBR ends its startup on a like
/// sign: its delivery rate stopped growing).
pub const ANSWERED_SHARE: f64 = 0.75;
/// Queueing delay (above the quickest round trip, and an eighth of it)
/// taken as a queue building at the server.
pub const QUEUE_DELAY: Duration = Duration::from_millis(1);
/// Answers a round needs before its mean round trip says anything of a queue.
pub const QUEUE_SAMPLES: u32 = 16;
/// What the rate is multiplied by in a round that saw a queue building.
pub const QUEUE_EASE: f64 = 0.95;
/// Rounds whose share of refusals is remembered.
pub const HISTORY: usize = 8;
/// Queries per second a nameserver starts at.
pub const INITIAL_RATE: f64 = 1000.0;
/// The time's worth of the rate a nameserver may be sent at once, when
/// that is more than 16 queries: a loop that runs late (the machine busy,
/// the scheduler's slice of a few milliseconds given to another process)
/// sends what it missed, not less than its rate.
pub const BURST_TIME: f64 = 0.010;
/// The rate is never cut below this (a nameserver that answers nothing
/// still gets a query now and then, to see when it is back).
pub const MIN_RATE: f64 = 2.0;

/// The caps and the switch of the control.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaceConfig {
    /// The rate never goes above this (queries/s; infinite for no cap).
    pub max_rate: f64,
    /// Adapt the rate to the nameserver; off: always `max_rate`.
    pub adaptive: bool,
}

/// How a query of this nameserver's ended, for the control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// An answer the name can keep.
    Good,
    /// No answer in time.
    Lost,
    /// REFUSED, SERVFAIL, or TC=1 over UDP.
    Refused,
}

/// A cut for losses that late answers may yet undo.
#[derive(Clone, Copy, Debug)]
struct Undo {
    /// The rate and its additive base before the cut.
    rate: f64,
    cut_at: f64,
    slow_start: bool,
    /// The losses counted in the round that cut, and how many of them
    /// were answered late since.
    losses: u32,
    answered_late: u32,
}

/// One nameserver's pacing; see the module docs.
#[derive(Clone, Debug)]
pub struct Pace {
    config: PaceConfig,
    rate: f64,
    tokens: f64,
    refilled: Instant,
    slow_start: bool,
    /// The rate at the last cut: the additive step is a twentieth of it.
    cut_at: f64,
    /// When the rate was last cut: losses of queries sent before do not count.
    last_cut: Instant,
    /// What the last cut for losses undoes to, while it may be undone.
    undo: Option<Undo>,
    /// Queries sent in this round and in the last.
    sent: u32,
    last_sent: u32,
    round_started: Instant,
    good: u32,
    lost: u32,
    refused: u32,
    throttled: bool,
    /// The share of refusals in each of the last rounds, newest last.
    refusal_shares: [f64; HISTORY],
    rounds: usize,
    /// The mean round trip of each of the last rounds with answers, newest
    /// last (`None`: not known).
    mean_rtts: [Option<Duration>; HISTORY],
    /// This round's round trips: their sum and count.
    round_rtt: Duration,
    /// The sum of their squares (s²), for the mean's standard error.
    round_rtt_squares: f64,
    round_samples: u32,
}

impl Pace {
    /// A nameserver first seen at `now`.
    pub fn new(config: PaceConfig, now: Instant) -> Pace {
        let rate = if config.adaptive {
            INITIAL_RATE.min(config.max_rate)
        } else {
            config.max_rate
        };
        Pace {
            config,
            rate,
            tokens: 1.0,
            refilled: now,
            slow_start: true,
            cut_at: rate,
            last_cut: now,
            undo: None,
            sent: 0,
            last_sent: 0,
            round_started: now,
            good: 0,
            lost: 0,
            refused: 0,
            throttled: false,
            refusal_shares: [0.0; HISTORY],
            rounds: 0,
            mean_rtts: [None; HISTORY],
            round_rtt: Duration::ZERO,
            round_rtt_squares: 0.0,
            round_samples: 0,
        }
    }

    /// One answer's round trip.
    pub fn round_trip(&mut self, rtt: Duration) {
        self.round_rtt += rtt;
        self.round_rtt_squares += rtt.as_secs_f64() * rtt.as_secs_f64();
        self.round_samples += 1;
    }

    /// Whether this round's answers took long enough to say a queue
    /// builds, against the least mean of the last rounds (jitter is in
    /// every round's mean; a queue only in the rounds that build it).
    /// Remembers this round's mean. A round of fewer than
    /// [`QUEUE_SAMPLES`] answers says nothing and is not remembered.
    fn queue_building(&mut self) -> bool {
        if self.round_samples < QUEUE_SAMPLES {
            return false;
        }
        let n = f64::from(self.round_samples);
        let mean = self.round_rtt / self.round_samples;
        let mean_s = mean.as_secs_f64();
        let variance = (self.round_rtt_squares / n - mean_s * mean_s).max(0.0);
        let noise = Duration::from_secs_f64(3.0 * (variance / n).sqrt());
        let noise = noise.max(2 * self.wander());
        let usual = self.mean_rtts.iter().flatten().min().copied();
        self.mean_rtts.rotate_left(1);
        self.mean_rtts[HISTORY - 1] = Some(mean);
        usual.is_some_and(|usual| mean > usual + QUEUE_DELAY.max(usual / 32).max(noise))
    }

    /// How far the remembered rounds' means wander from one round to the
    /// next: the median of their differences (zero before three are known).
    /// A path whose delay wanders by milliseconds (a loaded machine at
    /// either end) moves every round's mean; a queue moves a few rounds'.
    fn wander(&self) -> Duration {
        let mut steps = [Duration::ZERO; HISTORY - 1];
        let mut known = 0;
        for pair in self.mean_rtts.windows(2) {
            if let [Some(a), Some(b)] = pair {
                steps[known] = a.abs_diff(*b);
                known += 1;
            }
        }
        if known < 2 {
            return Duration::ZERO;
        }
        let steps = &mut steps[..known];
        steps.sort_unstable();
        steps[known / 2]
    }

    /// The current rate, queries per second (infinite when nothing caps it).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Queries allowed at once above the rate: [`BURST_TIME`]'s worth (the
    /// engine looks again every millisecond while the rate holds work back,
    /// but a busy machine may not run it for a scheduler slice), at least
    /// 16 (a tenth of a second's worth when that is fewer, at least 4). A
    /// loop that wakes a few milliseconds late (a loaded machine) still
    /// sends at the rate: with 4, a rate of 2,000/s once sent 1,400/s, and
    /// with 2 ms worth a rate of 128,000/s sent about 75,000/s beside an
    /// emulator and a server on two cores. Under a cap of the user's
    /// (`--rate`, `--rate-per-nameserver`) no more than [`BURST_TIME`]'s
    /// worth of the cap, at least one, and what a millisecond brings (the
    /// engine looks every millisecond: with a bucket of exactly one, what
    /// came past a token's time was lost, and a cap of 100/s sent 91/s).
    /// The floor of 4 let `--rate 5` send 9 queries in a second after a
    /// pause.
    fn burst(&self) -> f64 {
        let burst = (self.rate * BURST_TIME).max((self.rate * 0.1).clamp(4.0, 16.0));
        if self.config.max_rate.is_finite() {
            let cap = self.config.max_rate;
            burst.min((cap * BURST_TIME).max(1.0) + cap * 0.001)
        } else {
            burst
        }
    }

    fn refill(&mut self, now: Instant) {
        if self.rate.is_infinite() {
            self.tokens = f64::INFINITY;
            return;
        }
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst());
        self.refilled = now;
    }

    /// Takes a token for one query at `now`; false when the rate holds it
    /// back (the round is then marked as limited by the rate).
    pub fn try_take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            self.sent += 1;
            true
        } else {
            self.throttled = true;
            false
        }
    }

    /// Whether a token is there at `now`, without taking it (a round that
    /// finds none was limited by the rate).
    pub fn ready(&mut self, now: Instant) -> bool {
        self.refill(now);
        let ready = self.tokens >= 1.0;
        self.throttled |= !ready;
        ready
    }

    /// Whether the user capped this rate (`--rate`, `--rate-per-nameserver`).
    pub fn capped(&self) -> bool {
        self.config.max_rate.is_finite()
    }

    /// Takes a token at `now` for a query the control does not weigh (TCP
    /// after TC=1: its end is not observed), if one is there.
    pub fn take_aside(&mut self, now: Instant) -> bool {
        self.refill(now);
        let there = self.tokens >= 1.0;
        if there {
            self.tokens -= 1.0;
        }
        there
    }

    /// Takes a token [`Pace::ready`] found.
    pub fn take(&mut self) {
        self.tokens -= 1.0;
        self.sent += 1;
    }

    /// How long until a token is there (zero when one is).
    pub fn wait(&self, now: Instant) -> Duration {
        if self.rate.is_infinite() {
            return Duration::ZERO;
        }
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        let missing = 1.0 - (self.tokens + elapsed * self.rate);
        if missing <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(missing / self.rate)
        }
    }

    /// Counts the end of one query sent at `sent`, and closes the round
    /// when it is over (`round`: how long a round of this nameserver lasts,
    /// see the module docs). A loss or refusal of a query sent before the
    /// last cut is not counted: that cut answered it.
    pub fn observe(&mut self, verdict: Verdict, sent: Instant, now: Instant, round: Duration) {
        let before_the_cut = sent < self.last_cut;
        match verdict {
            Verdict::Good => self.good += 1,
            Verdict::Lost if !before_the_cut => self.lost += 1,
            Verdict::Refused if !before_the_cut => self.refused += 1,
            Verdict::Lost | Verdict::Refused => {}
        }
        self.end_round_if_due(now, round);
    }

    /// An answer came for a query sent at `sent` that was already counted
    /// lost: that loss is taken back (see the module docs). The answer
    /// itself is counted by [`Pace::observe`].
    pub fn answered_late(&mut self, sent: Instant) {
        if sent >= self.last_cut {
            self.lost = self.lost.saturating_sub(1);
            return;
        }
        let Some(undo) = self.undo.as_mut() else {
            return;
        };
        undo.answered_late += 1;
        if 2 * undo.answered_late > undo.losses {
            self.rate = self.rate.max(undo.rate);
            self.cut_at = undo.cut_at;
            self.slow_start = undo.slow_start;
            self.undo = None;
        }
    }

    /// Closes the round if it is over.
    pub fn end_round_if_due(&mut self, now: Instant, round: Duration) {
        // In slow start a round is half as long (about one round trip, as
        // TCP doubles per round trip): the rate reaches the path's in a
        // few round trips, at the cost of seeing a loss a round later.
        let round = if self.slow_start { round / 2 } else { round };
        let length = round.clamp(Duration::from_millis(20), Duration::from_secs(1));
        let elapsed = now.saturating_duration_since(self.round_started);
        if elapsed < length {
            return;
        }
        if self.config.adaptive {
            self.adapt(elapsed, now);
        }
        self.round_started = now;
        self.good = 0;
        self.lost = 0;
        self.refused = 0;
        self.throttled = false;
        self.last_sent = std::mem::take(&mut self.sent);
        self.round_rtt = Duration::ZERO;
        self.round_rtt_squares = 0.0;
        self.round_samples = 0;
    }

    /// The usual share of refusals: the least of the remembered rounds;
    /// all of them before two rounds are known (a server's first answers
    /// cannot tell policy from load).
    fn usual_refusals(&self) -> f64 {
        let known = self.rounds.min(HISTORY);
        if known < 2 {
            return 1.0;
        }
        self.refusal_shares[HISTORY - known..]
            .iter()
            .copied()
            .fold(1.0, f64::min)
    }

    /// In slow start, whether a round held back by the rate, whose sends
    /// grew by half or more on the last round's (the rate, not the sender,
    /// set the pace), brought fewer answers than [`ANSWERED_SHARE`] of the
    /// last round's queries (at least [`QUEUE_SAMPLES`] of them, to tell).
    fn answers_stalled(&self) -> bool {
        let answered = f64::from(self.good + self.refused);
        let last_sent = f64::from(self.last_sent);
        self.slow_start
            && self.throttled
            && self.last_sent >= QUEUE_SAMPLES
            && f64::from(self.sent) >= 1.5 * last_sent
            && answered < ANSWERED_SHARE * last_sent
    }

    fn adapt(&mut self, elapsed: Duration, now: Instant) {
        let total = f64::from(self.good + self.lost + self.refused);
        if total == 0.0 {
            // Nothing ended: nothing learnt, but a rate-limited round may grow.
            if self.throttled {
                self.grow();
            }
            return;
        }
        let share = f64::from(self.refused) / total;
        let excess = (share - self.usual_refusals()).max(0.0) * total;
        self.refusal_shares.rotate_left(1);
        self.refusal_shares[HISTORY - 1] = share;
        self.rounds += 1;
        let bad = f64::from(self.lost) + excess;
        let queueing = self.queue_building();
        let delivered = f64::from(self.good) / elapsed.as_secs_f64();
        let stalled = self.answers_stalled();
        if bad >= f64::from(MIN_BAD) && bad > LOSS_HIGH * total {
            let finite = if self.rate.is_finite() {
                self.rate
            } else {
                delivered.max(MIN_RATE)
            };
            let undo = Undo {
                rate: self.rate,
                cut_at: self.cut_at,
                slow_start: self.slow_start,
                losses: self.lost,
                answered_late: 0,
            };
            self.rate = delivered.clamp(finite * 0.5, finite * 0.85);
            self.cut(now);
            self.undo = Some(undo);
        } else if stalled {
            // At most halved, as a loss would: the losses of what was sent
            // after it cut the rest of the way.
            self.rate = delivered.max(self.rate * 0.5);
            self.cut(now);
        } else if queueing {
            if !self.slow_start {
                self.rate *= QUEUE_EASE;
            }
            self.slow_start = false;
        } else if self.throttled {
            self.grow();
        }
        self.rate = self.within_caps(self.rate);
    }

    /// `rate` no lower than [`MIN_RATE`] and no higher than the cap, which
    /// wins when it is lower still (`--rate-per-nameserver 1.5`: a clamp
    /// with its bounds crossed would panic).
    fn within_caps(&self, rate: f64) -> f64 {
        rate.max(MIN_RATE).min(self.config.max_rate)
    }

    /// Ends slow start at the rate just set, the base of the additive step;
    /// losses of what was sent before do not count.
    fn cut(&mut self, now: Instant) {
        self.undo = None;
        self.cut_at = self.rate;
        self.slow_start = false;
        self.last_cut = now;
    }

    fn grow(&mut self) {
        self.rate = if self.slow_start {
            self.rate * 2.0
        } else {
            self.rate + (self.cut_at / 20.0).max(self.rate / 16.0).max(1.0)
        };
        self.rate = self.within_caps(self.rate);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    const ADAPTIVE: PaceConfig = PaceConfig {
        max_rate: f64::INFINITY,
        adaptive: true,
    };

    /// What the simulated nameserver does.
    struct Server {
        /// Its limiter's rate (queries/s; a twentieth of a second of burst).
        limit: f64,
        /// What it does above the limit: `Lost` (drops) or `Refused`.
        over: Verdict,
        /// Every k-th query is lost on the path.
        loss_every: Option<u32>,
        /// Every k-th query is refused on policy, whatever the rate.
        policy_every: Option<u32>,
    }

    /// A nameserver behind `rtt` (answers and refusals come back after it;
    /// a loss is noticed after `rto`), and a client that always has work.
    /// Returns the good answers and the queries sent per second in the last
    /// `measure` of `total` simulated time, and the final rate.
    fn simulate(server: Server, total: Duration, measure: Duration) -> (f64, f64, f64) {
        let (rtt, rto) = (Duration::from_millis(10), Duration::from_millis(100));
        let start = Instant::now();
        let mut pace = Pace::new(ADAPTIVE, start);
        // Each queue is in sending order (all of one kind take as long):
        // when the end is seen, when the query left (and its verdict).
        let mut quick: VecDeque<(Instant, Instant, Verdict)> = VecDeque::new();
        let mut losses: VecDeque<(Instant, Instant)> = VecDeque::new();
        let burst = server.limit / 20.0;
        let (mut bucket, mut bucket_at) = (burst, start);
        let (mut answered, mut sent, mut n) = (0u64, 0u64, 0u32);
        let step = Duration::from_micros(500);
        let mut now = start;
        while now < start + total {
            now += step;
            while quick.front().is_some_and(|(t, _, _)| *t <= now) {
                let (_, sent, verdict) = quick.pop_front().unwrap();
                pace.round_trip(rtt);
                pace.observe(verdict, sent, now, rto);
            }
            while losses.front().is_some_and(|(t, _)| *t <= now) {
                let (_, sent) = losses.pop_front().unwrap();
                pace.observe(Verdict::Lost, sent, now, rto);
            }
            pace.end_round_if_due(now, rto);
            let counting = now >= start + total - measure;
            while pace.try_take(now) {
                n += 1;
                sent += u64::from(counting);
                let every = |k: Option<u32>| k.is_some_and(|k| n % k == 0);
                if every(server.loss_every) {
                    losses.push_back((now + rto, now));
                    continue;
                }
                bucket = (bucket + now.duration_since(bucket_at).as_secs_f64() * server.limit)
                    .min(burst);
                bucket_at = now;
                if bucket < 1.0 {
                    match server.over {
                        Verdict::Lost => losses.push_back((now + rto, now)),
                        verdict => quick.push_back((now + rtt, now, verdict)),
                    }
                    continue;
                }
                bucket -= 1.0;
                if every(server.policy_every) {
                    quick.push_back((now + rtt, now, Verdict::Refused));
                } else {
                    answered += u64::from(counting);
                    quick.push_back((now + rtt, now, Verdict::Good));
                }
            }
        }
        let secs = measure.as_secs_f64();
        (answered as f64 / secs, sent as f64 / secs, pace.rate())
    }

    /// A server that answers `capacity` queries a second from a queue of
    /// `queue` (its socket buffer), dropping what does not fit, behind
    /// `base` of round trip. Returns the answers and the losses per second
    /// in the last `measure` of `total`.
    fn simulate_queue(
        capacity: f64,
        queue: f64,
        base: Duration,
        total: Duration,
        measure: Duration,
    ) -> (f64, f64) {
        let rto = Duration::from_millis(100);
        let start = Instant::now();
        let mut pace = Pace::new(ADAPTIVE, start);
        let mut answers: VecDeque<(Instant, Duration)> = VecDeque::new();
        let mut losses: VecDeque<(Instant, Instant)> = VecDeque::new();
        let mut free_at = start;
        let (mut answered, mut lost) = (0u64, 0u64);
        let step = Duration::from_micros(250);
        let mut now = start;
        while now < start + total {
            now += step;
            while answers.front().is_some_and(|(t, _)| *t <= now) {
                let (due, rtt) = answers.pop_front().unwrap();
                pace.round_trip(rtt);
                pace.observe(Verdict::Good, due - rtt, now, rto.max(2 * base));
            }
            while losses.front().is_some_and(|(t, _)| *t <= now) {
                let (_, sent) = losses.pop_front().unwrap();
                pace.observe(Verdict::Lost, sent, now, rto.max(2 * base));
            }
            pace.end_round_if_due(now, rto.max(2 * base));
            let counting = now >= start + total - measure;
            while pace.try_take(now) {
                let waiting = free_at.saturating_duration_since(now).as_secs_f64() * capacity;
                if waiting >= queue {
                    lost += u64::from(counting);
                    losses.push_back((now + rto, now));
                    continue;
                }
                free_at = free_at.max(now) + Duration::from_secs_f64(1.0 / capacity);
                answered += u64::from(counting);
                answers.push_back((free_at + base, free_at + base - now));
            }
        }
        let secs = measure.as_secs_f64();
        (answered as f64 / secs, lost as f64 / secs)
    }

    #[test]
    fn a_queue_building_at_the_server_stops_the_rate_before_it_overflows() {
        // knot on two cores: about 60,000 answers a second, a socket buffer
        // of about 270 queries; on loopback and 50 ms away.
        // On a long path the queue shows later, against the path's own noise
        // (a thirty-second of it): a little more overflows.
        for (base, most_lost) in [
            (Duration::from_micros(100), 0.02),
            (Duration::from_millis(50), 0.03),
        ] {
            let (answered, lost) = simulate_queue(
                60_000.0,
                270.0,
                base,
                Duration::from_secs(6),
                Duration::from_secs(4),
            );
            let seen = format!("{base:?}: answered {answered}/s, lost {lost}/s");
            assert!(answered >= 0.9 * 60_000.0, "{seen}");
            assert!(lost <= most_lost * answered, "{seen}");
        }
    }

    fn limiter(over: Verdict) -> Server {
        Server {
            limit: 2000.0,
            over,
            loss_every: None,
            policy_every: None,
        }
    }

    /// Behind a limiter of 2,000 queries/s that drops (`Lost`) or refuses
    /// what is over: at least 95 % of the limit is used, and less than a
    /// fifth more is sent than it takes.
    fn settles_just_above_the_limit(over: Verdict) {
        let (answered, sent, rate) = simulate(
            limiter(over),
            Duration::from_secs(20),
            Duration::from_secs(15),
        );
        let seen = format!("{over:?}: answered {answered}/s, sent {sent}/s, rate {rate}");
        assert!(answered >= 0.95 * 2000.0, "{seen}");
        assert!(sent <= 1.2 * 2000.0, "{seen}");
    }

    #[test]
    fn behind_a_limiter_that_drops_the_rate_settles_just_above_the_limit() {
        settles_just_above_the_limit(Verdict::Lost);
    }

    #[test]
    fn behind_a_limiter_that_refuses_the_rate_settles_just_above_the_limit() {
        settles_just_above_the_limit(Verdict::Refused);
    }

    #[test]
    fn random_loss_of_two_percent_does_not_hold_the_rate_back() {
        // One query in 50 lost, no limit to speak of: the rate keeps growing.
        let server = Server {
            limit: 1e7,
            over: Verdict::Lost,
            loss_every: Some(50),
            policy_every: None,
        };
        let (answered, _, rate) = simulate(server, Duration::from_secs(2), Duration::from_secs(1));
        assert!(rate > 100_000.0, "rate {rate}");
        assert!(answered > 50_000.0, "answered {answered}/s");
    }

    #[test]
    fn refusals_on_policy_do_not_hold_the_rate_back() {
        // A third of the names refused in every round: the server's usual
        // share, not a sign of load (after the first round's cut).
        let server = Server {
            limit: 1e7,
            over: Verdict::Lost,
            loss_every: None,
            policy_every: Some(3),
        };
        let (_, _, rate) = simulate(server, Duration::from_secs(2), Duration::from_secs(1));
        assert!(rate > 100_000.0, "rate {rate}");
    }

    #[test]
    fn a_cap_holds_and_off_means_the_cap() {
        let now = Instant::now();
        let capped = PaceConfig {
            max_rate: 500.0,
            adaptive: true,
        };
        let mut pace = Pace::new(capped, now);
        assert_eq!(pace.rate(), 500.0);
        // 5 s of rounds limited by the rate: never above the cap.
        sends_all_it_may(&mut pace, now, 5000);
        assert_eq!(pace.rate(), 500.0);
        let fixed = Pace::new(
            PaceConfig {
                max_rate: f64::INFINITY,
                adaptive: false,
            },
            now,
        );
        assert!(fixed.rate().is_infinite());
        assert_eq!(fixed.wait(now), Duration::ZERO);
    }

    #[test]
    fn a_low_cap_sends_no_burst_after_a_pause() {
        // --rate 5: after a 2 s pause, one second of trying to send every
        // millisecond lets 1 query go at once and one about each 200 ms
        // after: the cap and one, as any bucket of one lets go in a
        // second (the floor of 4 for the adaptive rate let 9 go).
        let start = Instant::now();
        let mut pace = Pace::new(
            PaceConfig {
                max_rate: 5.0,
                adaptive: false,
            },
            start,
        );
        let resumed = start + Duration::from_secs(2);
        let sent = (0..1000)
            .filter(|ms| pace.try_take(resumed + Duration::from_millis(*ms)))
            .count();
        assert_eq!(sent, 6);
    }

    #[test]
    fn a_cap_below_the_floor_holds_without_a_panic() {
        // --rate-per-nameserver 1.5: below MIN_RATE (a clamp with crossed
        // bounds panicked at the first round's end).
        let now = Instant::now();
        let mut pace = Pace::new(
            PaceConfig {
                max_rate: 1.5,
                adaptive: true,
            },
            now,
        );
        sends_all_it_may(&mut pace, now, 3000);
        assert_eq!(pace.rate(), 1.5);
    }

    /// Every millisecond for `ms` from `now`, takes every token there is
    /// (every query the pace lets go is answered at once).
    fn sends_all_it_may(pace: &mut Pace, now: Instant, ms: u32) {
        let mut t = now;
        for _ in 0..ms {
            t += Duration::from_millis(1);
            while pace.try_take(t) {}
            pace.end_round_if_due(t, Duration::from_millis(1));
        }
    }

    #[test]
    fn tokens_come_at_the_rate() {
        let now = Instant::now();
        let mut pace = Pace::new(
            PaceConfig {
                max_rate: 100.0,
                adaptive: false,
            },
            now,
        );
        assert!(pace.try_take(now));
        assert!(!pace.try_take(now));
        let wait = pace.wait(now);
        assert!((wait.as_secs_f64() - 0.01).abs() < 1e-6, "{wait:?}");
        // Over a second: a hundred tokens, and after a pause one at once
        // (a cap's bucket holds 10 ms of it, at least one, and what one
        // millisecond brings).
        let mut taken = 0;
        let mut t = now;
        for _ in 0..1000 {
            t += Duration::from_millis(1);
            while pace.try_take(t) {
                taken += 1;
            }
        }
        assert!((99..=101).contains(&taken), "{taken}");
        t += Duration::from_secs(5);
        let burst = std::iter::from_fn(|| pace.try_take(t).then_some(())).count();
        assert_eq!(burst, 1);
    }

    /// A fast rate keeps 10 ms of tokens: a loop that missed a scheduler
    /// slice of a few milliseconds sends what it missed, and no more.
    #[test]
    fn a_late_loop_sends_what_it_missed() {
        let now = Instant::now();
        let rate = 100_000.0;
        let mut pace = Pace::new(
            PaceConfig {
                max_rate: rate,
                adaptive: false,
            },
            now,
        );
        assert!(pace.try_take(now) && !pace.try_take(now));
        let late = now + Duration::from_millis(6);
        let sent = std::iter::from_fn(|| pace.try_take(late).then_some(())).count();
        assert_eq!(sent, 600, "6 ms late at 100,000/s");
        let idle = late + Duration::from_secs(1);
        let sent = std::iter::from_fn(|| pace.try_take(idle).then_some(())).count();
        assert_eq!(sent, 1000, "after a second idle: 10 ms worth");
    }

    /// Slow start behind a limiter of 2,000 queries/s that drops the rest:
    /// it ends where the answers stop coming faster, not rounds later when
    /// the first loss is seen. In the first second, fewer queries are lost
    /// than the limiter lets through in half a second (443; 7,326 when
    /// slow start ended only on losses).
    #[test]
    fn slow_start_ends_where_answers_stop_coming_faster() {
        let total = Duration::from_secs(1);
        let (answered, sent, rate) = simulate(limiter(Verdict::Lost), total, total);
        let lost = sent - answered;
        let seen = format!("answered {answered}, lost {lost}, rate {rate}");
        assert!(lost < 1000.0, "{seen}");
        assert!(answered >= 0.8 * 2000.0, "{seen}");
    }

    /// One cut per flight: after a cut, the losses of queries sent before
    /// it are not a reason for another.
    #[test]
    fn losses_sent_before_a_cut_do_not_cut_again() {
        let start = Instant::now();
        let mut pace = Pace::new(ADAPTIVE, start);
        let round = Duration::from_millis(100);
        let sent_early = start + Duration::from_millis(10);
        // A round from 0 to 100 ms: half lost; cut at its end.
        for _ in 0..100 {
            pace.observe(
                Verdict::Good,
                sent_early,
                start + Duration::from_millis(50),
                round,
            );
            pace.observe(
                Verdict::Lost,
                sent_early,
                start + Duration::from_millis(50),
                round,
            );
        }
        let cut = start + Duration::from_millis(100);
        pace.end_round_if_due(cut, round);
        let after_cut = pace.rate();
        assert!(after_cut < INITIAL_RATE, "no cut: {after_cut}");
        // The next round: the rest of the flight before the cut is lost,
        // what was sent after it answered.
        let seen = cut + Duration::from_millis(50);
        for _ in 0..100 {
            pace.observe(Verdict::Lost, sent_early, seen, round);
            pace.observe(Verdict::Good, cut + Duration::from_millis(1), seen, round);
        }
        pace.end_round_if_due(cut + Duration::from_millis(200), round);
        assert_eq!(pace.rate(), after_cut);
    }

    /// A cut made by losses whose answers come late after all (the machine
    /// stalled past the wait) is undone once more than half of them are
    /// answered; a late answer to a loss not yet acted on takes it back.
    #[test]
    fn a_cut_for_losses_answered_late_is_undone() {
        let start = Instant::now();
        let mut pace = Pace::new(ADAPTIVE, start);
        let round = Duration::from_millis(100);
        let at = |ms| start + Duration::from_millis(ms);
        for _ in 0..100 {
            pace.observe(Verdict::Good, at(10), at(50), round);
        }
        for _ in 0..40 {
            pace.observe(Verdict::Lost, at(10), at(50), round);
        }
        pace.end_round_if_due(at(100), round);
        let (before, after) = (INITIAL_RATE, pace.rate());
        assert!(after < before, "no cut: {after}");
        // Twenty late answers: half, not more; the cut holds.
        for _ in 0..20 {
            pace.answered_late(at(10));
        }
        assert_eq!(pace.rate(), after);
        pace.answered_late(at(10));
        assert_eq!(pace.rate(), before);
        // A round whose losses are all answered late cuts nothing.
        for _ in 0..100 {
            pace.observe(Verdict::Good, at(110), at(150), round);
            pace.observe(Verdict::Lost, at(110), at(150), round);
            pace.answered_late(at(110));
        }
        pace.end_round_if_due(at(200), round);
        assert!(pace.rate() >= before, "{}", pace.rate());
    }

    /// A rate cut low (a loaded machine, a burst of losses) on a path whose
    /// round trips jitter by a few milliseconds: few answers a round make
    /// a noisy mean, which must not read as a queue round after round (the
    /// rate once stayed at tens of queries a second behind 5 ms of delay
    /// and 1 % loss, long after the load was gone).
    #[test]
    fn a_low_rate_on_a_jittery_path_grows_back() {
        let start = Instant::now();
        let mut pace = Pace::new(ADAPTIVE, start);
        pace.slow_start = false;
        pace.rate = 40.0;
        pace.cut_at = 40.0;
        let rto = Duration::from_millis(100);
        let mut answers: VecDeque<(Instant, Duration)> = VecDeque::new();
        let step = Duration::from_micros(500);
        let mut now = start;
        let mut seed = 7u64;
        while now < start + Duration::from_secs(10) {
            now += step;
            while answers.front().is_some_and(|(t, _)| *t <= now) {
                let (due, rtt) = answers.pop_front().unwrap();
                pace.round_trip(rtt);
                pace.observe(Verdict::Good, due - rtt, now, rto);
            }
            pace.end_round_if_due(now, rto);
            while pace.try_take(now) {
                // 10 ms and up to 4 ms of jitter (a generator of our own).
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let rtt = Duration::from_micros(10_000 + (seed >> 33) % 8_000);
                answers.push_back((now + rtt, rtt));
                answers.make_contiguous().sort_by_key(|(t, _)| *t);
            }
        }
        assert!(pace.rate() >= 1000.0, "the rate stayed at {}", pace.rate());
    }
}
