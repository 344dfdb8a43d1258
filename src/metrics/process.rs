//! The process's own processor time and memory, read when scraped: the
//! standard `process_cpu_seconds_total` and `process_resident_memory_bytes`
//! of every Prometheus exporter, and `dnsluice_thread_cpu_seconds_total`
//! by thread name, from the kernel's per-thread accounts
//! (`/proc/self/task/*/stat`): while a capture runs on many threads, the
//! rate of each says which one is using a whole core (the input's walk, the
//! merger, the map's helper) and so limits the run.

/// User and system time of the whole process, in seconds (`getrusage`).
pub fn cpu_seconds() -> f64 {
    dnsluice_modules::cpu::process().as_secs_f64()
}

/// The process's resident memory in bytes (`/proc/self/statm`), if known.
pub fn resident_bytes() -> Option<f64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: f64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no memory effects.
    #[allow(unsafe_code)]
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    (page > 0).then_some(pages * page as f64)
}

/// Each thread's user and system time in seconds, added up by thread
/// name: the live threads' time now, and the last time read of those that
/// ended since the process started (so each name's sum only grows, as a
/// counter must: a name's sum once fell when one of its threads ended,
/// which Prometheus reads as a reset); empty where `/proc` has no tasks.
pub fn thread_cpu_seconds() -> Vec<(String, f64)> {
    // SAFETY: sysconf has no memory effects.
    #[allow(unsafe_code)]
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    // Read under the lock: two scrapes at once (an HA pair of Prometheus
    // servers) must not fold an older reading after a newer one.
    static SEEN: std::sync::Mutex<ThreadTimes> = std::sync::Mutex::new(ThreadTimes::new());
    let mut seen = dnsluice_core::sync::lock(&SEEN);
    let main = std::process::id().to_string();
    let mut live: Vec<(u64, String, u64)> = Vec::new();
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let Some((mut name, ticks_used)) = parse_stat(&stat) else {
            continue;
        };
        // The main thread carries the program's name: called `main`, as
        // the run's summary calls it.
        if task.file_name().to_str() == Some(main.as_str()) {
            name = "main".into();
        }
        live.push((tid, name, ticks_used));
    }
    let totals = seen.update(live);
    let seconds = |t: u64| t as f64 / ticks.max(1) as f64;
    totals
        .into_iter()
        .map(|(name, t)| (name, seconds(t)))
        .collect()
}

/// What the threads of the process have used, in clock ticks: each live
/// thread's last reading, and by name what the ended ones had.
struct ThreadTimes {
    /// (thread id, name, ticks) of the threads seen live at the last reading.
    live: Vec<(u64, String, u64)>,
    /// By name, the ticks of the threads that ended.
    ended: Vec<(String, u64)>,
}

impl ThreadTimes {
    const fn new() -> ThreadTimes {
        ThreadTimes {
            live: Vec::new(),
            ended: Vec::new(),
        }
    }

    /// Takes a new reading of the live threads; the ticks by name, sorted.
    /// A thread of the last reading that is gone (or whose id now names
    /// another thread: another name, or fewer ticks) has ended.
    fn update(&mut self, live: Vec<(u64, String, u64)>) -> Vec<(String, u64)> {
        for (tid, name, ticks) in std::mem::take(&mut self.live) {
            let same = live
                .iter()
                .any(|(t, n, now)| *t == tid && *n == name && *now >= ticks);
            if !same {
                add(&mut self.ended, &name, ticks);
            }
        }
        self.live = live;
        let mut totals = self.ended.clone();
        for (_, name, ticks) in &self.live {
            add(&mut totals, name, *ticks);
        }
        totals.sort();
        totals
    }
}

/// Adds `ticks` to `name`'s sum in `sums`.
fn add(sums: &mut Vec<(String, u64)>, name: &str, ticks: u64) {
    match sums.iter_mut().find(|(n, _)| n == name) {
        Some((_, sum)) => *sum += ticks,
        None => sums.push((name.to_string(), ticks)),
    }
}

/// A task's name and its user plus system time in clock ticks, from its
/// `stat` line: `TID (NAME) STATE ...`, `utime` and `stime` the 14th and
/// 15th fields; the name may hold spaces and parentheses, so it ends at the
/// last `)`.
fn parse_stat(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    // After the name: field 3 (state) onwards; utime and stime are 14 and 15.
    let mut rest = stat.get(close + 1..)?.split_whitespace().skip(11);
    let utime: u64 = rest.next()?.parse().ok()?;
    let stime: u64 = rest.next()?.parse().ok()?;
    Some((name, utime + stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_name_and_ticks_even_with_odd_names() {
        // A line as Linux writes it (fields 3 to 17 shown; the rest cut).
        let line = "4242 (split (0) x) R 1 2 3 4 5 6 7 8 9 10 250 38 0 0 20";
        assert_eq!(parse_stat(line), Some(("split (0) x".to_string(), 288)));
        assert_eq!(parse_stat("4242 (cut"), None);
    }

    #[test]
    fn a_names_time_keeps_what_its_ended_threads_used() {
        let mut times = ThreadTimes::new();
        let live = |list: &[(u64, &str, u64)]| -> Vec<(u64, String, u64)> {
            list.iter()
                .map(|(t, n, k)| (*t, n.to_string(), *k))
                .collect()
        };
        let got = times.update(live(&[(1, "main", 5), (2, "w", 10), (3, "w", 20)]));
        assert_eq!(got, [("main".to_string(), 5), ("w".to_string(), 30)]);
        // Thread 3 ended; thread 2 went on: 20 + 15.
        let got = times.update(live(&[(1, "main", 6), (2, "w", 15)]));
        assert_eq!(got, [("main".to_string(), 6), ("w".to_string(), 35)]);
        // Thread 2's id now names a new thread of another name.
        let got = times.update(live(&[(1, "main", 7), (2, "x", 1)]));
        let want = [("main", 7), ("w", 35), ("x", 1)];
        let want: Vec<(String, u64)> = want.iter().map(|(n, k)| (n.to_string(), *k)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn this_threads_own_time_is_listed_under_its_name() {
        let busy = std::thread::Builder::new()
            .name("stat-test-busy".into())
            .spawn(|| {
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_millis(120) {
                    std::hint::black_box(0u64.wrapping_add(1));
                }
                thread_cpu_seconds()
            })
            .unwrap();
        let listed = busy.join().unwrap();
        let ours = listed.iter().find(|(name, _)| name == "stat-test-busy");
        // 120 ms of spinning, counted in 10 ms ticks.
        assert!(ours.is_some_and(|(_, s)| *s >= 0.05), "{listed:?}");
        assert!(cpu_seconds() >= 0.05);
    }
}
