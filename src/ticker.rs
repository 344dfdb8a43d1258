//! A thread that calls a function at fixed periods (the progress bar's
//! refresh, the statistics interval) until it is dropped.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The running thread; dropping it stops it (after a tick in progress ends).
pub struct Ticker {
    stop: Option<mpsc::Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Calls `tick` at every multiple of each of `periods` from now (once
    /// when two fall together). No period (all `None`): no thread.
    pub fn spawn(periods: &[Option<Duration>], mut tick: impl FnMut() + Send + 'static) -> Ticker {
        let periods: Vec<Duration> = periods
            .iter()
            .flatten()
            .copied()
            .filter(|p| !p.is_zero())
            .collect();
        if periods.is_empty() {
            return Ticker {
                stop: None,
                handle: None,
            };
        }
        let (stop, stopped) = mpsc::channel::<()>();
        let handle = dnsluice_core::thread::named("dnsluice-ticker")
            .spawn(move || {
                let start = Instant::now();
                let mut next: Vec<Instant> = periods.iter().map(|p| start + *p).collect();
                loop {
                    let wake = *next.iter().min().expect("at least one period");
                    match stopped.recv_timeout(wake.saturating_duration_since(Instant::now())) {
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                    tick();
                    let now = Instant::now();
                    for (at, period) in next.iter_mut().zip(&periods) {
                        while *at <= now {
                            *at += *period;
                        }
                    }
                }
            })
            .ok();
        Ticker {
            stop: Some(stop),
            handle,
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    #[test]
    fn ticks_until_dropped() {
        let ticks = Arc::new(AtomicU32::new(0));
        let counted = ticks.clone();
        let ticker = Ticker::spawn(&[Some(Duration::from_millis(5))], move || {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        while ticks.load(Ordering::SeqCst) < 3 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(ticker);
        let after = ticks.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(
            ticks.load(Ordering::SeqCst),
            after,
            "no tick after the drop"
        );
        // No period: no thread, nothing called.
        drop(Ticker::spawn(&[None], || panic!("never called")));
    }
}
