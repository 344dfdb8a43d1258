//! Where a run's processor time went: the process's total (`getrusage`)
//! and, by thread name, what the threads the run started noted as they
//! ended (`dnsluice_modules::cpu`), with the main thread's own. Printed
//! after `dnsluice run`'s summary and written into `--stats-json`
//! (`"cpu_s"`, `"threads"`), so that on a machine of many cores the thread
//! that limits a run (the input's walk, the merger, the map's helper) is
//! read off the summary.

use crate::progress::group;
use dnsluice_modules::cpu::{self, ThreadCpu};
use serde_json::{json, Value};
use std::time::Duration;

/// The most thread names [`CpuReport::line`] lists.
pub const LINE_MOST: usize = 8;

/// The processor time of a run, in all and by thread name.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuReport {
    /// User and system time of the whole process.
    pub total: Duration,
    /// By thread name, most first: the name, how many threads had it, their time.
    pub threads: Vec<(String, usize, Duration)>,
}

impl CpuReport {
    /// Takes the threads' notes and adds the calling (main) thread's time
    /// under its name; the total is the process's so far.
    pub fn take() -> CpuReport {
        let mut noted = cpu::take_noted();
        let name = std::thread::current().name().unwrap_or("main").to_string();
        noted.push(ThreadCpu {
            name,
            cpu: cpu::this_thread(),
        });
        CpuReport::of(cpu::process(), noted)
    }

    /// The report of `noted` threads in a process that used `total`.
    pub fn of(total: Duration, noted: Vec<ThreadCpu>) -> CpuReport {
        let mut threads: Vec<(String, usize, Duration)> = Vec::new();
        for thread in noted {
            match threads.iter_mut().find(|(name, ..)| *name == thread.name) {
                Some((_, count, cpu)) => {
                    *count += 1;
                    *cpu += thread.cpu;
                }
                None => threads.push((thread.name, 1, thread.cpu)),
            }
        }
        threads.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        CpuReport { total, threads }
    }

    /// One line: `cpu 1.530 s: split-0 0.690 s, split-1 0.680 s, mmpcap-helper ×2 0.080 s`.
    /// At most [`LINE_MOST`] names: past that, the busiest but one, then
    /// the rest together (`1,020 threads more 0.113 s`), so that a run on
    /// a thousand threads still has a line to read; `--stats-json` has
    /// every name.
    pub fn line(&self) -> String {
        let shown = if self.threads.len() > LINE_MOST {
            LINE_MOST - 1
        } else {
            self.threads.len()
        };
        let mut parts: Vec<String> = self.threads[..shown]
            .iter()
            .map(|(name, count, cpu)| match count {
                1 => format!("{name} {:.3} s", cpu.as_secs_f64()),
                n => format!("{name} ×{n} {:.3} s", cpu.as_secs_f64()),
            })
            .collect();
        let rest = &self.threads[shown..];
        if !rest.is_empty() {
            let count: usize = rest.iter().map(|(_, count, _)| count).sum();
            let cpu: Duration = rest.iter().map(|(.., cpu)| *cpu).sum();
            parts.push(format!(
                "{} threads more {:.3} s",
                group(count as u64),
                cpu.as_secs_f64()
            ));
        }
        format!(
            "cpu {:.3} s: {}",
            self.total.as_secs_f64(),
            parts.join(", ")
        )
    }

    /// The summary text `text` (one JSON object and a newline, as
    /// `--stats-json` writes it) with `"cpu_s"` and `"threads"` added; as it
    /// was when it is not an object.
    pub fn added_to_text(&self, text: String) -> String {
        let Ok(mut summary) = serde_json::from_str::<Value>(&text) else {
            return text;
        };
        self.add_to(&mut summary);
        let mut text = summary.to_string();
        text.push('\n');
        text
    }

    /// Adds `"cpu_s"` and `"threads"` (`[{"name","count","cpu_s"}]`) to a
    /// summary object.
    pub fn add_to(&self, summary: &mut Value) {
        let Some(object) = summary.as_object_mut() else {
            return;
        };
        let threads: Vec<Value> = self
            .threads
            .iter()
            .map(|(name, count, cpu)| json!({"name": name, "count": count, "cpu_s": cpu.as_secs_f64()}))
            .collect();
        object.insert("cpu_s".into(), json!(self.total.as_secs_f64()));
        object.insert("threads".into(), Value::Array(threads));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn thread(name: &str, cpu: u64) -> ThreadCpu {
        ThreadCpu {
            name: name.into(),
            cpu: ms(cpu),
        }
    }

    #[test]
    fn threads_of_one_name_add_up_and_the_busiest_come_first() {
        let noted = vec![
            thread("mmpcap-helper", 40),
            thread("split-0", 690),
            thread("mmpcap-helper", 50),
            thread("main", 20),
            thread("split-1", 680),
        ];
        let report = CpuReport::of(ms(2000), noted);
        assert_eq!(
            report.line(),
            "cpu 2.000 s: split-0 0.690 s, split-1 0.680 s, mmpcap-helper ×2 0.090 s, main 0.020 s"
        );
        let mut summary = json!({"stages": [], "elapsed_s": 1.0});
        report.add_to(&mut summary);
        assert_eq!(summary["cpu_s"], json!(2.0));
        assert_eq!(
            summary["threads"][2],
            json!({"name": "mmpcap-helper", "count": 2, "cpu_s": 0.09})
        );
        assert_eq!(summary["threads"].as_array().map(Vec::len), Some(4));
    }

    #[test]
    fn a_line_names_the_busiest_threads_and_adds_up_the_rest() {
        let mut noted: Vec<ThreadCpu> = (0..1024)
            .map(|i| thread(&format!("split-{i}"), 1 + u64::from(i == 7) * 100))
            .collect();
        noted.push(thread("mmpcap-helper", 6));
        noted.push(thread("main", 150));
        let report = CpuReport::of(ms(1500), noted);
        // The busiest seven by name (then split-0 to split-5 at 1 ms, by
        // name: split-0, split-1, split-10, split-100, ...), then the 1,019 others.
        assert_eq!(
            report.line(),
            "cpu 1.500 s: main 0.150 s, split-7 0.101 s, mmpcap-helper 0.006 s, \
             split-0 0.001 s, split-1 0.001 s, split-10 0.001 s, split-100 0.001 s, \
             1,019 threads more 1.019 s"
        );
        assert_eq!(report.threads.len(), 1026, "the JSON keeps every name");
    }
}
