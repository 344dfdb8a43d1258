//! How many threads run a pipeline: the `threads` key (`dnsluice run
//! --threads N`) and the choice made when it says `auto` (the default).
//!
//! With N > 1 threads the stages after the input run in N copies, each in a
//! thread of its own over its part of the input: a `filter.split` is put
//! right after the input (and given the input's records to read in parts
//! itself, when the input hands them over: [`crate::Producer::parts`]).
//! Stateless stages ([`Parallel::Any`]) take objects
//! in batches round-robin; when a stage keeps state per flow
//! ([`Parallel::ByFlow`]: `filter.dns` reassembling TCP and fragments), the
//! objects are spread by a hash of their two addresses, so a flow stays on
//! one thread. `auto` takes the machine's cores when the chain allows it
//! and gains by it: a stage that costs far more per object than crossing
//! threads ([`ModuleEntry::costly`]: writing JSON; a chain that only counts
//! is slower on threads), a file input (`input.mmpcap`, `input.fpcap`: a
//! live source would make objects wait in batches) and no stage that cannot be copied
//! ([`Parallel::No`]: a client, a pacer, a Lua filter; and an output
//! writing a file of its own format, [`Parallel::FilePerThread`], without
//! `{thread}` in its path); otherwise one, and the plan says why.

use super::{ConfigError, Drive, Pipeline, StageSpec};
use crate::registry::{DownstreamBuilder, Factory, ModuleEntry, Parallel, StageOptions};
use crate::{InputParts, Receiver, Registry, StageError};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// The module that runs a chain's stages in threads.
const SPLIT: &str = "filter.split";

/// The `threads` key: how many threads run the stages after the input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Threads {
    /// The machine's cores when the chain allows it, else one.
    #[default]
    Auto,
    /// This many (1 to 1024).
    Count(u32),
}

impl FromStr for Threads {
    type Err = String;

    fn from_str(text: &str) -> Result<Threads, String> {
        if text == "auto" {
            return Ok(Threads::Auto);
        }
        match text.parse::<u32>() {
            Ok(n @ 1..=1024) => Ok(Threads::Count(n)),
            _ => Err(format!(
                "`{text}`: threads is `auto` or a number from 1 to 1024"
            )),
        }
    }
}

impl fmt::Display for Threads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threads::Auto => write!(f, "auto"),
            Threads::Count(n) => write!(f, "{n}"),
        }
    }
}

/// What a pipeline runs on, and why (said in the run's summary).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadPlan {
    /// Threads running the stages after the input (1: the input's thread).
    pub count: u32,
    /// How objects are spread (`round-robin` or `flow`), with several threads.
    pub by: &'static str,
    /// Why this many, in a few words.
    pub why: String,
    /// The threads read the input in parts themselves (a mapped pcap or
    /// pcapng: see `Producer::parts`), instead of the input's thread reading
    /// every record and handing them theirs.
    pub in_parts: bool,
}

impl ThreadPlan {
    fn one(why: impl Into<String>) -> ThreadPlan {
        ThreadPlan {
            count: 1,
            by: "round-robin",
            why: why.into(),
            in_parts: false,
        }
    }
}

impl fmt::Display for ThreadPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count == 1 {
            write!(f, "1 thread ({})", self.why)
        } else {
            write!(f, "{} threads by {} ({})", self.count, self.by, self.why)?;
            match self.in_parts {
                true => write!(f, ", each reading its own parts of the capture"),
                false => Ok(()),
            }
        }
    }
}

/// Whether a stage's options say `{thread}` (an output writing a file per thread).
fn writes_own_file(options: &toml::Table) -> bool {
    options
        .values()
        .any(|v| v.as_str().is_some_and(|s| s.contains("{thread}")))
}

/// Whether a stage may be copied into threads: its module says so, or it
/// writes a file of its own format and every thread writes one of its own
/// (`{thread}`). A client (`output.diff`, `output.dnscli`) stays on one
/// thread whatever its paths say: each copy would ask its own part, and
/// write its own summary over the others'.
fn copyable(entry: &ModuleEntry, options: &toml::Table) -> Parallel {
    match entry.parallel {
        Parallel::FilePerThread if writes_own_file(options) => Parallel::Any,
        Parallel::FilePerThread => Parallel::No,
        parallel => parallel,
    }
}

impl Pipeline {
    /// Decides the threads of a pipeline whose modules are `entries`; an
    /// error when the `threads` key asks for what the chain cannot do.
    pub(super) fn plan_threads(&self, entries: &[&ModuleEntry]) -> Result<ThreadPlan, ConfigError> {
        let asked = match self.threads {
            Threads::Count(1) => return Ok(ThreadPlan::one("threads = 1")),
            Threads::Count(n) => Some(n),
            Threads::Auto => None,
        };
        let refuse = |message: String| ConfigError {
            file: self.file.clone(),
            line: self.threads_line,
            key: Some("threads".into()),
            message,
        };
        if let Some(offset) = entries
            .iter()
            .position(|e| matches!(e.factory, Factory::Split(_)))
        {
            let module = entries[offset].name;
            return match asked {
                Some(_) => Err(refuse(format!(
                    "the pipeline splits into threads with `{module}` already: drop `threads` or the split"
                ))),
                None => Ok(ThreadPlan::one(format!("the pipeline's own `{module}`"))),
            };
        }
        if self.drive == Drive::Pull {
            return match asked {
                Some(_) => Err(refuse(
                    "a pull pipeline runs on one thread: drop `drive = \"pull\"` or `threads`"
                        .into(),
                )),
                None => Ok(ThreadPlan::one("a pull pipeline")),
            };
        }
        let stages = self.stages.iter().zip(entries).skip(1);
        let mut by_flow = false;
        for (spec, entry) in stages {
            match copyable(entry, &spec.options) {
                Parallel::Any => {}
                Parallel::ByFlow => by_flow = true,
                Parallel::No | Parallel::FilePerThread => {
                    let why = format!("`{}` runs on one thread", spec.module);
                    return match asked {
                        Some(_) => Err(refuse(format!(
                            "`{}` cannot run in several threads (it talks to the network, paces, runs user code, or writes one file of its own format; an output may write one file per thread with `{{thread}}` in its path): use threads = 1",
                            spec.module
                        ))),
                        None => Ok(ThreadPlan::one(why)),
                    };
                }
            }
        }
        let by = if by_flow { "flow" } else { "round-robin" };
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        if let Some(count) = asked {
            // Threads past the cores take turns: each waits for the others'
            // parts and holds its output longer (docs/capture.md, Memory).
            let why = match count > cores {
                true => format!(
                    "threads = {count}, more than the machine's {cores} cores: they take turns"
                ),
                false => format!("threads = {count}"),
            };
            return Ok(ThreadPlan {
                count,
                by,
                why,
                in_parts: false,
            });
        }
        if !entries[1..].iter().any(|e| e.costly) {
            return Ok(ThreadPlan::one(
                "its stages cost less per object than crossing threads: threads = N to split anyway",
            ));
        }
        if entries[0].parallel != Parallel::Any {
            return Ok(ThreadPlan::one(format!(
                "`{}` may be live: threads = N to split it anyway",
                entries[0].name
            )));
        }
        if cores == 1 {
            return Ok(ThreadPlan::one("one core"));
        }
        Ok(ThreadPlan {
            count: cores.min(1024),
            by,
            why: "the machine's cores".into(),
            in_parts: false,
        })
    }
}

impl Pipeline {
    /// The `filter.split` that `threads` puts after the input: every stage
    /// after the input is built in each of its threads, which read the
    /// input themselves when it was handed over in `parts`.
    pub(super) fn implicit_split(
        &self,
        plan: &ThreadPlan,
        entries: &[&ModuleEntry],
        registry: Arc<Registry>,
        parts: Option<InputParts>,
    ) -> Result<Box<dyn Receiver>, ConfigError> {
        let refuse = |message: String| ConfigError {
            file: self.file.clone(),
            line: self.threads_line,
            key: Some("threads".into()),
            message,
        };
        let Some(Factory::Split(make)) = registry.get(SPLIT).map(|e| e.factory.clone()) else {
            return Err(refuse(format!(
                "several threads need the `{SPLIT}` module, which is not registered"
            )));
        };
        let mut table = toml::Table::new();
        table.insert("threads".into(), i64::from(plan.count).into());
        table.insert("by".into(), plan.by.into());
        table.insert("ordered".into(), self.ordered.into());
        table.insert("report".into(), false.into());
        table.insert("inline".into(), true.into());
        let options = StageOptions::new(SPLIT, table).with_registry(registry.clone());
        let builder = self.downstream_builder(entries, 1, registry.clone());
        make(&options, builder, parts).map_err(|e| refuse(e.to_string()))
    }
}

impl Pipeline {
    /// Builds stages `from..` (filters, then the output) for one worker of a
    /// split: string options have `{thread}` replaced by the worker's index
    /// (so each thread's output can write its own file), and errors name the
    /// pipeline file and line.
    pub(super) fn downstream_builder(
        &self,
        entries: &[&ModuleEntry],
        from: usize,
        registry: Arc<Registry>,
    ) -> DownstreamBuilder {
        let pipeline = self.clone();
        let entries: Vec<ModuleEntry> = entries[from..].iter().map(|e| (*e).clone()).collect();
        Arc::new(move |index: usize| {
            let specs = &pipeline.stages[from..];
            let options = |spec: &StageSpec| {
                let mut table = spec.options.clone();
                for (_, value) in table.iter_mut() {
                    if let toml::Value::String(text) = value {
                        *text = text.replace("{thread}", &index.to_string());
                    }
                }
                StageOptions::new(&spec.module, table).with_registry(registry.clone())
            };
            let located = |spec: &StageSpec, e: StageError| {
                StageError::config("filter.split", pipeline.stage_error(spec, e).to_string())
            };
            let (out_spec, filter_specs) = specs.split_last().expect("an output after the split");
            if writes_own_file(&out_spec.options) {
                // Each thread writes a file of its own: no shared stream.
                crate::merge::leave();
            }
            let mut receiver = match &entries[entries.len() - 1].factory {
                Factory::Output(make) => {
                    make(&options(out_spec)).map_err(|e| located(out_spec, e))?
                }
                _ => unreachable!("roles checked before"),
            };
            for (offset, spec) in filter_specs.iter().enumerate().rev() {
                if let Factory::Filter { push, .. } = &entries[offset].factory {
                    receiver = push(&options(spec), receiver).map_err(|e| located(spec, e))?;
                }
            }
            Ok(receiver)
        })
    }
}
