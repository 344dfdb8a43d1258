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

/// Each live thread's user and system time in seconds, added up by thread
/// name (threads that ended are no longer counted); empty where `/proc`
/// has no tasks.
pub fn thread_cpu_seconds() -> Vec<(String, f64)> {
    // SAFETY: sysconf has no memory effects.
    #[allow(unsafe_code)]
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let main = std::process::id().to_string();
    let mut by_name: Vec<(String, f64)> = Vec::new();
    for task in tasks.flatten() {
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
        let seconds = ticks_used as f64 / ticks.max(1) as f64;
        match by_name.iter_mut().find(|(n, _)| *n == name) {
            Some((_, total)) => *total += seconds,
            None => by_name.push((name, seconds)),
        }
    }
    by_name.sort_by(|a, b| a.0.cmp(&b.0));
    by_name
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
