//! TOML pipelines: an ordered list of `[[stage]]` tables, each a `module` name
//! plus that module's options, built into a runnable [`Chain`].
//!
//! ```toml
//! drive = "push"          # optional: "push" (from the input, default) or "pull" (from the end)
//! metrics_listen = "127.0.0.1:9108"   # optional: serve Prometheus metrics there (`dnsluice run`)
//!
//! [[stage]]
//! module = "input.mmpcap"
//! path = "examples/data/sample.pcap"
//!
//! [[stage]]
//! module = "filter.layer"
//!
//! [[stage]]
//! module = "output.json"
//! ```
//!
//! Every error names the file, the line and the key ([`ConfigError`]).
//!
//! A split stage (a [`Factory::Split`], such as `filter.split`) says
//! "everything after me runs in N threads": in a push pipeline the stages
//! after it are not built here but by each of its worker threads, through a
//! [`DownstreamBuilder`], so every thread has its own copy of them (string
//! options may say `{thread}` to differ per thread). One split per pipeline;
//! pull pipelines cannot split.

mod made;
mod threads;

pub use threads::{ThreadPlan, Threads};

use crate::registry::{Factory, ModuleEntry, Role, StageOptions};
use crate::stage::{drive_chain, Watch};
use crate::{Producer, Receiver, Registry, StageError, StageStats};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toml::Spanned;

/// A configuration error: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The pipeline file (as given).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The key at fault, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": key `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Which end drives the chain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Drive {
    /// The input pushes each object through receivers (`input → filter → output`).
    #[default]
    Push,
    /// The output pulls each object through producers (`output ← filter ← input`).
    Pull,
}

/// One `[[stage]]` of a pipeline.
#[derive(Clone, Debug)]
pub struct StageSpec {
    /// The module's dotted name.
    pub module: String,
    /// Its options (the table without `module`).
    pub options: toml::Table,
    /// Line of the stage (its `module` key); `None` for a stage made in
    /// code ([`Pipeline::from_stages`]).
    pub line: Option<usize>,
    /// Line of each option key (keys set with `--set` have none).
    pub key_lines: BTreeMap<String, usize>,
    /// Options given (or replaced) on the command line, as `INDEX.KEY`.
    pub set_keys: Vec<String>,
}

/// A parsed pipeline, not yet built.
#[derive(Clone, Debug)]
pub struct Pipeline {
    /// The file it came from (for messages).
    pub file: String,
    /// The directory relative paths in the file are relative to (the file's
    /// own, when read with [`Pipeline::read`]); `None`: the working directory.
    pub base_dir: Option<PathBuf>,
    /// Which end drives.
    pub drive: Drive,
    /// Where to serve Prometheus metrics while it runs (`metrics_listen`;
    /// `--metrics-listen` overrides it).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// The stages, in order.
    pub stages: Vec<StageSpec>,
    /// Threads for the stages after the input (the `threads` key; see [`Threads`]).
    pub threads: Threads,
    /// Line of the `threads` key, when the file has one.
    pub threads_line: Option<usize>,
    /// With several threads sharing one output stream: write it in input
    /// order, as one thread would (the `ordered` key, default true).
    pub ordered: bool,
}

type SpannedTable = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPipeline {
    #[serde(default)]
    drive: Option<Spanned<Drive>>,
    #[serde(default)]
    threads: Option<Spanned<toml::Value>>,
    #[serde(default)]
    ordered: Option<bool>,
    #[serde(default)]
    metrics_listen: Option<Spanned<String>>,
    #[serde(default)]
    stage: Vec<Spanned<SpannedTable>>,
}

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

impl Pipeline {
    /// Reads and parses the pipeline file at `path`. Paths in it (the options
    /// whose type is a path) are relative to the file's directory, so the
    /// pipeline runs the same from any working directory; paths given with
    /// [`Pipeline::set`] stay relative to the working directory.
    pub fn read(path: &Path) -> Result<Pipeline, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            line: None,
            key: None,
            message: format!("cannot read the pipeline: {e}"),
        })?;
        let mut pipeline = Pipeline::parse(&file, &text)?;
        pipeline.base_dir = Some(
            path.parent()
                .filter(|dir| !dir.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        );
        Ok(pipeline)
    }

    /// Parses pipeline `text`, read from `file`.
    pub fn parse(file: &str, text: &str) -> Result<Pipeline, ConfigError> {
        let err = |line: Option<usize>, key: Option<&str>, message: String| ConfigError {
            file: file.to_string(),
            line,
            key: key.map(str::to_string),
            message,
        };
        let raw: RawPipeline = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start));
            err(line, None, e.message().to_string())
        })?;
        if raw.stage.is_empty() {
            return Err(err(
                None,
                Some("stage"),
                "no [[stage]] tables: a pipeline needs at least an input and an output".into(),
            ));
        }
        let mut stages = Vec::with_capacity(raw.stage.len());
        for (index, table) in raw.stage.into_iter().enumerate() {
            let table_line = line_of(text, table.span().start);
            let mut module = None;
            let mut options = toml::Table::new();
            let mut key_lines = BTreeMap::new();
            for (key, value) in table.into_inner() {
                let line = line_of(text, key.span().start);
                let key = key.into_inner();
                if key == "module" {
                    match value.into_inner() {
                        toml::Value::String(name) => module = Some((name, line)),
                        other => {
                            return Err(err(
                                Some(line),
                                Some("module"),
                                format!(
                                    "expected a module name string, found {}",
                                    other.type_str()
                                ),
                            ))
                        }
                    }
                } else {
                    key_lines.insert(key.clone(), line);
                    options.insert(key, value.into_inner());
                }
            }
            let (module, line) = module.ok_or_else(|| {
                err(
                    Some(table_line),
                    Some("module"),
                    format!("stage {index} has no `module` key"),
                )
            })?;
            stages.push(StageSpec {
                module,
                options,
                line: Some(line),
                key_lines,
                set_keys: Vec::new(),
            });
        }
        let (threads, threads_line) = match raw.threads {
            None => (Threads::Auto, None),
            Some(value) => {
                let line = line_of(text, value.span().start);
                let text = match value.into_inner() {
                    toml::Value::String(s) => s,
                    other => other.to_string(),
                };
                let threads = text
                    .parse()
                    .map_err(|e| err(Some(line), Some("threads"), e))?;
                (threads, Some(line))
            }
        };
        let metrics_listen = match raw.metrics_listen {
            Some(addr) => Some(addr.get_ref().parse().map_err(|e| {
                err(
                    Some(line_of(text, addr.span().start)),
                    Some("metrics_listen"),
                    format!("{e}: give an address and a port, e.g. \"127.0.0.1:9108\""),
                )
            })?),
            None => None,
        };
        Ok(Pipeline {
            file: file.to_string(),
            base_dir: None,
            drive: raw.drive.map(Spanned::into_inner).unwrap_or_default(),
            metrics_listen,
            stages,
            threads,
            threads_line,
            ordered: raw.ordered.unwrap_or(true),
        })
    }

    /// Applies an override `INDEX.KEY=VALUE` (e.g. `0.path=big.pcap`). VALUE is
    /// read as a TOML value when it parses as one (`true`, `42`, `"x"`), else as
    /// a string. `INDEX.module=NAME` replaces the module. The pipeline's own
    /// keys take no index: `threads=4`, `ordered=false`.
    pub fn set(&mut self, assignment: &str) -> Result<(), ConfigError> {
        let err = |message: String| ConfigError {
            file: "--set".to_string(),
            line: None,
            key: None,
            message,
        };
        let (target, value) = assignment
            .split_once('=')
            .ok_or_else(|| err(format!("`{assignment}`: expected INDEX.KEY=VALUE")))?;
        match target {
            "threads" => {
                self.threads = value.parse().map_err(err)?;
                self.threads_line = None;
                return Ok(());
            }
            "ordered" => {
                self.ordered = value
                    .parse()
                    .map_err(|_| err(format!("`{value}`: ordered is true or false")))?;
                return Ok(());
            }
            _ => {}
        }
        let (index, key) = target
            .split_once('.')
            .ok_or_else(|| err(format!("`{target}`: expected INDEX.KEY, e.g. 0.path")))?;
        let index: usize = index.parse().map_err(|_| {
            err(format!(
                "`{index}`: the stage index must be a number from 0"
            ))
        })?;
        let count = self.stages.len();
        let stage = self.stages.get_mut(index).ok_or_else(|| {
            err(format!(
                "stage {index} does not exist (the pipeline has {count})"
            ))
        })?;
        let value = parse_value(value);
        if key == "module" {
            match value {
                toml::Value::String(name) => stage.module = name,
                _ => return Err(err("module must be a name".into())),
            }
        } else {
            stage.key_lines.remove(key);
            stage.set_keys.push(format!("{index}.{key}"));
            stage.options.insert(key.to_string(), value);
        }
        Ok(())
    }

    /// Builds the chain with modules from `registry`.
    ///
    /// Every stage's module and options are checked first (an unknown module,
    /// an unknown key, a wrong value), then the roles (input, filters...,
    /// output), then the stages are built.
    pub fn build(&self, registry: &Registry) -> Result<Chain, ConfigError> {
        let Some(last) = self.stages.len().checked_sub(1) else {
            return Err(ConfigError {
                file: self.file.clone(),
                line: None,
                key: Some("stage".into()),
                message: "no stages: a pipeline needs at least an input and an output".into(),
            });
        };
        let mut entries = Vec::with_capacity(self.stages.len());
        let mut resolved = self.clone();
        for spec in &mut resolved.stages {
            let entry = registry.get(&spec.module).ok_or_else(|| {
                self.error_at(
                    spec,
                    None,
                    format!(
                        "unknown module `{}`; modules are: {}",
                        spec.module,
                        registry.names()
                    ),
                )
            })?;
            self.resolve_paths(spec, entry);
            (entry.check)(spec.options.clone()).map_err(|e| {
                self.stage_error(spec, crate::registry::option_error(&spec.module, e))
            })?;
            entries.push(entry);
        }
        for (index, (spec, entry)) in self.stages.iter().zip(&entries).enumerate() {
            let expected = match index {
                0 => Role::Input,
                i if i == last => Role::Output,
                _ => Role::Filter,
            };
            if entry.role() != expected {
                return Err(self.error_at(
                    spec,
                    None,
                    format!(
                        "`{}` is {} module, but stage {index} must be {} (a pipeline is input, filters..., output)",
                        spec.module,
                        with_article(entry.role().as_str()),
                        with_article(expected.as_str())
                    ),
                ));
            }
        }
        resolved.build_checked(&entries, Arc::new(registry.clone()))
    }

    /// Makes the relative paths the file gave (options whose type is a path)
    /// relative to [`Pipeline::base_dir`]. `-` (standard input or output) and
    /// values given with `--set` are left as they are.
    fn resolve_paths(&self, spec: &mut StageSpec, entry: &ModuleEntry) {
        let Some(base) = &self.base_dir else { return };
        let resolve = |value: &mut toml::Value| {
            if let toml::Value::String(text) = value {
                let path = Path::new(text.as_str());
                if text != "-" && path.is_relative() {
                    *text = base.join(path).display().to_string();
                }
            }
        };
        for doc in entry.options.iter().filter(|d| d.shape.is_path()) {
            if !spec.key_lines.contains_key(doc.key) {
                continue; // absent, or given with --set
            }
            match spec.options.get_mut(doc.key) {
                Some(toml::Value::Array(items)) => items.iter_mut().for_each(resolve),
                Some(value) => resolve(value),
                None => {}
            }
        }
    }

    /// Builds the stages of a pipeline whose modules, options and roles were checked.
    fn build_checked(
        &self,
        entries: &[&ModuleEntry],
        registry: Arc<Registry>,
    ) -> Result<Chain, ConfigError> {
        let last = self.stages.len() - 1;
        let options = |spec: &StageSpec| {
            StageOptions::new(&spec.module, spec.options.clone()).with_registry(registry.clone())
        };
        let wrap = |spec: &StageSpec, e: StageError| self.stage_error(spec, e);
        let (first, rest) = self.stages.split_first().expect("at least one stage");
        let (out_spec, filters) = rest.split_last().ok_or_else(|| {
            self.error_at(
                first,
                None,
                "a pipeline needs an output stage after the input".into(),
            )
        })?;
        let build_output = |spec: &StageSpec| match &entries[last].factory {
            Factory::Output(make) => make(&options(spec)).map_err(|e| wrap(spec, e)),
            _ => unreachable!("roles checked above"),
        };
        let build_input = || match &entries[0].factory {
            Factory::Input(make) => make(&options(first)).map_err(|e| wrap(first, e)),
            _ => unreachable!("roles checked above"),
        };
        let is_split = |offset: usize| matches!(entries[offset + 1].factory, Factory::Split(_));
        let split_at = (0..filters.len()).find(|&offset| is_split(offset));
        if let Some(first_split) = split_at {
            if self.drive == Drive::Pull {
                return Err(self.error_at(
                    &filters[first_split],
                    None,
                    format!(
                        "`{}` runs the rest of the chain in threads, which only a push pipeline can do (drop `drive = \"pull\"`)",
                        filters[first_split].module
                    ),
                ));
            }
            if let Some(second) = (first_split + 1..filters.len()).find(|&offset| is_split(offset))
            {
                return Err(self.error_at(
                    &filters[second],
                    None,
                    "a pipeline may split into threads once".into(),
                ));
            }
        }
        let mut plan = self.plan_threads(entries)?;
        // Pushing on one thread, the output and filters are built before the
        // input opens its file, so a mistyped option is reported before any
        // I/O error. Pulling, a filter needs its input first.
        let (producer, receiver) = match self.drive {
            Drive::Push if plan.count > 1 => {
                // The input first: the threads may read it in parts (`Producer::parts`).
                let mut producer = build_input()?;
                let parts = producer.parts();
                plan.in_parts = parts.is_some();
                let receiver = self.implicit_split(&plan, entries, registry.clone(), parts)?;
                (producer, receiver)
            }
            Drive::Push => {
                // Everything after a split is built in each of its threads.
                let (mut receiver, upstream_filters) = match split_at {
                    Some(offset) => {
                        let spec = &filters[offset];
                        let Factory::Split(make) = &entries[offset + 1].factory else {
                            unreachable!("found above")
                        };
                        let builder =
                            self.downstream_builder(entries, offset + 2, registry.clone());
                        let receiver =
                            make(&options(spec), builder, None).map_err(|e| wrap(spec, e))?;
                        (receiver, &filters[..offset])
                    }
                    None => (build_output(out_spec)?, filters),
                };
                for (offset, spec) in upstream_filters.iter().enumerate().rev() {
                    if let Factory::Filter { push, .. } = &entries[offset + 1].factory {
                        receiver = push(&options(spec), receiver).map_err(|e| wrap(spec, e))?;
                    }
                }
                (build_input()?, receiver)
            }
            Drive::Pull => {
                let receiver = build_output(out_spec)?;
                let mut producer = build_input()?;
                for (offset, spec) in filters.iter().enumerate() {
                    if let Factory::Filter { pull, .. } = &entries[offset + 1].factory {
                        producer = pull(&options(spec), producer).map_err(|e| wrap(spec, e))?;
                    }
                }
                (producer, receiver)
            }
        };
        Ok(Chain {
            producer,
            receiver,
            threads: plan,
        })
    }

    fn error_at(&self, spec: &StageSpec, key: Option<&str>, message: String) -> ConfigError {
        let from_command_line = key.and_then(|k| {
            spec.set_keys
                .iter()
                .find(|s| s.split_once('.').is_some_and(|(_, key)| key == k))
        });
        if let Some(target) = from_command_line {
            // The value came from `--set INDEX.KEY=...`, not from the file.
            return ConfigError {
                file: "--set".to_string(),
                line: None,
                key: Some(target.clone()),
                message,
            };
        }
        let line = key
            .and_then(|k| spec.key_lines.get(k).copied())
            .or(spec.line);
        ConfigError {
            file: self.file.clone(),
            line,
            key: key.map(str::to_string),
            message,
        }
    }

    /// Attaches file and line to an error a constructor returned.
    fn stage_error(&self, spec: &StageSpec, e: StageError) -> ConfigError {
        match e.into_kind() {
            crate::error::ErrorKind::Option {
                module,
                key,
                message,
            } => {
                let message = format!("{module}: {message}");
                self.error_at(spec, key.as_deref(), message)
            }
            other => self.error_at(spec, None, other.to_string()),
        }
    }
}

/// "an input", "a filter", "an output".
fn with_article(role: &str) -> String {
    let article = if role.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {role}")
}

fn parse_value(text: &str) -> toml::Value {
    #[derive(Deserialize)]
    struct Probe {
        v: toml::Value,
    }
    toml::from_str::<Probe>(&format!("v = {text}"))
        .map(|p| p.v)
        .unwrap_or_else(|_| toml::Value::String(text.to_string()))
}

/// A built chain: a producer side and a receiver side, joined by [`Chain::run`].
/// In push mode the producer is the input alone and the receiver holds the
/// filters and the output; in pull mode the producer holds input and filters.
pub struct Chain {
    /// The pulling half.
    pub producer: Box<dyn Producer>,
    /// The pushing half.
    pub receiver: Box<dyn Receiver>,
    /// The threads it runs on, and why.
    pub threads: ThreadPlan,
}

impl Chain {
    /// Runs the chain to its end, calling `watch` between objects whenever
    /// it is due (see [`Watch`]).
    pub fn run(&mut self, watch: Option<Watch<'_>>) -> Result<u64, StageError> {
        // The boxes opened once here: each call in the loop then goes
        // through one vtable, not the box's and then the stage's.
        drive_chain(&mut *self.producer, &mut *self.receiver, watch)
    }

    /// Every stage's counters, in pipeline order.
    pub fn stats(&self) -> Vec<StageStats> {
        let mut out = Vec::new();
        self.producer.stats(&mut out);
        self.receiver.stats(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stages_with_lines() {
        let text = "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"a.pcap\"\n\n[[stage]]\nmodule = \"output.null\"\n";
        let p = Pipeline::parse("p.toml", text).unwrap();
        assert_eq!(p.stages.len(), 2);
        assert_eq!(p.stages[0].module, "input.mmpcap");
        assert_eq!(p.stages[0].line, Some(2));
        assert_eq!(p.stages[0].key_lines["path"], 3);
        assert_eq!(p.stages[1].line, Some(6));
        assert_eq!(p.drive, Drive::Push);
    }

    #[test]
    fn syntax_error_names_line() {
        let e = Pipeline::parse("p.toml", "[[stage]]\nmodule = \"x\"\npath = \n").unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.to_string().starts_with("p.toml:3: "), "{e}");
    }

    #[test]
    fn unknown_top_level_key_is_an_error() {
        let e = Pipeline::parse("p.toml", "stages = 1\n").unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.message.contains("unknown field `stages`"), "{e}");
    }

    #[test]
    fn stage_without_module_is_an_error() {
        let e = Pipeline::parse("p.toml", "[[stage]]\npath = \"x\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("module"));
        assert!(e.message.contains("no `module` key"));
    }

    #[test]
    fn module_must_be_a_string() {
        let e = Pipeline::parse("p.toml", "[[stage]]\nmodule = 3\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("module")));
    }

    #[test]
    fn empty_pipeline_is_an_error() {
        let e = Pipeline::parse("p.toml", "").unwrap_err();
        assert!(e.message.contains("no [[stage]]"));
    }

    #[test]
    fn bad_drive_value_names_line() {
        let e = Pipeline::parse(
            "p.toml",
            "\ndrive = \"sideways\"\n[[stage]]\nmodule=\"x\"\n",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("push"), "{e}");
    }

    #[test]
    fn metrics_listen_is_an_address_or_an_error_naming_its_line() {
        let text = "metrics_listen = \"127.0.0.1:9108\"\n[[stage]]\nmodule=\"x\"\n";
        let p = Pipeline::parse("p.toml", text).unwrap();
        assert_eq!(p.metrics_listen, Some("127.0.0.1:9108".parse().unwrap()));
        assert!(p
            .to_toml()
            .starts_with("metrics_listen = \"127.0.0.1:9108\"\n"));
        let e = Pipeline::parse(
            "p.toml",
            "\nmetrics_listen = \"9108\"\n[[stage]]\nmodule=\"x\"\n",
        )
        .unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("metrics_listen"))
        );
    }

    #[test]
    fn stages_made_in_code_print_as_a_file_that_reads_back() {
        let mut input = toml::Table::new();
        input.insert("path".into(), "a b.pcap".into());
        let mut output = toml::Table::new();
        output.insert("servers".into(), vec!["127.0.0.1:53", "[::1]:53"].into());
        output.insert("timeout".into(), "2s".into());
        let stages = [("input.mmpcap", input), ("output.diff", output)];
        let made = Pipeline::from_stages("dnsluice diff", stages.clone());
        assert_eq!(
            (made.file.as_str(), made.stages[0].line),
            ("dnsluice diff", None)
        );
        let text = made.to_toml();
        assert!(
            text.starts_with("[[stage]]\nmodule = \"input.mmpcap\"\n"),
            "{text}"
        );
        let read = Pipeline::parse("printed", &text).unwrap();
        let read: Vec<(String, toml::Table)> = read
            .stages
            .into_iter()
            .map(|s| (s.module, s.options))
            .collect();
        let made: Vec<(String, toml::Table)> = stages
            .into_iter()
            .map(|(m, o)| (m.to_string(), o))
            .collect();
        assert_eq!(read, made);
    }

    #[test]
    fn an_error_in_a_stage_made_in_code_has_no_line() {
        let made = Pipeline::from_stages("dnsluice replay", [("output.x", toml::Table::new())]);
        let e = made.error_at(&made.stages[0], Some("server"), "bad".into());
        assert_eq!((e.line, e.key.as_deref()), (None, Some("server")));
        assert_eq!(e.to_string(), "dnsluice replay: key `server`: bad");
    }

    #[test]
    fn set_overrides_options_and_module() {
        let text = "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"a.pcap\"\n[[stage]]\nmodule = \"output.null\"\n";
        let mut p = Pipeline::parse("p.toml", text).unwrap();
        p.set("0.path=/tmp/b.pcap").unwrap();
        p.set("0.module=input.fpcap").unwrap();
        p.set("1.count=42").unwrap();
        assert_eq!(p.stages[0].options["path"].as_str(), Some("/tmp/b.pcap"));
        assert_eq!(p.stages[0].module, "input.fpcap");
        assert_eq!(p.stages[1].options["count"].as_integer(), Some(42));
        assert!(p
            .set("7.path=x")
            .unwrap_err()
            .message
            .contains("does not exist"));
        assert!(p.set("path=x").is_err());
        assert!(p.set("0.path").is_err());
    }
}
