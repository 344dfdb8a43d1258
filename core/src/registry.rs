//! The module registry: dotted names → constructors.
//!
//! One registry serves TOML pipelines, Lua and the CLI: a module added here
//! with [`Registry::add`] is usable everywhere by its name. A module's
//! options are one struct deriving [`dnsluice_options::Options`]; the entry's
//! constructors ([`ModuleEntry::input`], [`ModuleEntry::map`], ...) take it
//! typed, and its documentation ([`ModuleEntry::options`]) comes from the
//! same declaration.

use crate::{FlatMap, FlatMapStage, InputParts, Map, MapStage, Producer, Receiver, StageError};
use dnsluice_options::{OptionDoc, OptionError, Options};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a module sits in a chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Produces objects from outside (a file, an interface).
    Input,
    /// Takes objects and passes (some of) them on.
    Filter,
    /// Takes objects and consumes them (prints, writes, sends).
    Output,
}

impl Role {
    /// `input`, `filter` or `output`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Input => "input",
            Role::Filter => "filter",
            Role::Output => "output",
        }
    }
}

/// A stage's options as given in the pipeline, not yet typed, and the
/// registry the chain is built from.
#[derive(Clone, Default)]
pub struct StageOptions {
    /// The module's dotted name, for error messages.
    pub module: String,
    /// The options (every key of the stage's table but `module`).
    pub table: toml::Table,
    /// The registry the chain is built from, for a stage that builds stages
    /// of its own (`filter.lua`'s script reaches the modules through it), so
    /// that a module added to a registry at any time is seen by all of them.
    pub registry: Option<Arc<Registry>>,
}

impl std::fmt::Debug for StageOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageOptions")
            .field("module", &self.module)
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl StageOptions {
    /// Options `table` for `module`, with no registry.
    pub fn new(module: &str, table: toml::Table) -> Self {
        StageOptions {
            module: module.to_string(),
            table,
            registry: None,
        }
    }

    /// The same options, for a chain built from `registry`.
    pub fn with_registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Parses the options into `T` (see [`dnsluice_options`]). On failure
    /// the error names the offending key when there is one
    /// ([`crate::error::ErrorKind::Option`]).
    pub fn parse<T: Options>(&self) -> Result<T, StageError> {
        T::from_table(self.table.clone()).map_err(|e| option_error(&self.module, e))
    }
}

/// An [`OptionError`] of `module` as a [`StageError`].
pub fn option_error(module: &str, e: OptionError) -> StageError {
    StageError::option(module, e.key.as_deref(), e.message)
}

/// Builds an input stage from its options.
pub type InputFactory =
    Arc<dyn Fn(&StageOptions) -> Result<Box<dyn Producer>, StageError> + Send + Sync>;
/// Builds a filter stage that pushes to `downstream`.
pub type PushFilterFactory = Arc<
    dyn Fn(&StageOptions, Box<dyn Receiver>) -> Result<Box<dyn Receiver>, StageError> + Send + Sync,
>;
/// Builds a filter stage that pulls from `upstream`.
pub type PullFilterFactory = Arc<
    dyn Fn(&StageOptions, Box<dyn Producer>) -> Result<Box<dyn Producer>, StageError> + Send + Sync,
>;
/// Builds an output stage from its options.
pub type OutputFactory =
    Arc<dyn Fn(&StageOptions) -> Result<Box<dyn Receiver>, StageError> + Send + Sync>;

/// Builds, in the calling thread, everything after a split stage (its filters
/// and the output) for worker `index`; called once in each worker thread.
pub type DownstreamBuilder =
    Arc<dyn Fn(usize) -> Result<Box<dyn Receiver>, StageError> + Send + Sync>;
/// Builds a stage that hands objects to worker threads, each running its own
/// copy of the rest of the chain made with the [`DownstreamBuilder`] (see
/// `filter.split` and [`crate::pipeline`]); given the input handed over to
/// be read in parts ([`crate::Producer::parts`]), its threads read it.
pub type SplitFactory = Arc<
    dyn Fn(
            &StageOptions,
            DownstreamBuilder,
            Option<InputParts>,
        ) -> Result<Box<dyn Receiver>, StageError>
        + Send
        + Sync,
>;

/// How to construct a module, by role.
#[derive(Clone)]
pub enum Factory {
    /// An input.
    Input(InputFactory),
    /// A filter, in its push and pull forms.
    Filter {
        /// Push form: holds its downstream.
        push: PushFilterFactory,
        /// Pull form: holds its upstream.
        pull: PullFilterFactory,
    },
    /// An output.
    Output(OutputFactory),
    /// A filter that runs the rest of the chain in worker threads (push only).
    Split(SplitFactory),
}

/// Whether copies of a stage may run in several threads, each over its own
/// part of one input (`dnsluice run --threads N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parallel {
    /// Each object is handled on its own: any thread may take any object.
    Any,
    /// It keeps state per flow (TCP streams, IP fragments): the packets
    /// between two addresses must meet on one thread.
    ByFlow,
    /// An output writing one file of its own format (a header, a footer):
    /// its copies may run in threads only when each writes a file of its
    /// own (`{thread}` in its path), else it is [`Parallel::No`].
    FilePerThread,
    /// It cannot be copied: it talks to the network, paces, or runs user
    /// code that may keep state (its copies would each talk, pace or keep
    /// their own part, and write their own summary over the others').
    No,
}

/// One registered module.
#[derive(Clone)]
pub struct ModuleEntry {
    /// Dotted name (`input.mmpcap`).
    pub name: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// Its options, from the options struct's declaration.
    pub options: Vec<OptionDoc>,
    /// Checks a table of options without building anything (unknown keys,
    /// types, ranges), so a mistake is reported before anything else.
    pub check: fn(toml::Table) -> Result<(), OptionError>,
    /// Its constructor(s).
    pub factory: Factory,
    /// Whether its copies may run in several threads.
    pub parallel: Parallel,
    /// It costs far more per object than crossing threads does (hundreds of
    /// ns: writing JSON): `threads = auto` splits only a chain with such a
    /// stage (a cheap chain on threads is slower than on one).
    pub costly: bool,
}

fn check<O: Options>(table: toml::Table) -> Result<(), OptionError> {
    O::from_table(table).map(|_| ())
}

impl ModuleEntry {
    fn with<O: Options>(name: &'static str, summary: &'static str, factory: Factory) -> Self {
        ModuleEntry {
            name,
            summary,
            options: O::docs(),
            check: check::<O>,
            factory,
            parallel: Parallel::No,
            costly: false,
        }
    }

    /// Says whether copies of the module may run in several threads (a
    /// module that says nothing may not).
    pub fn parallel(mut self, parallel: Parallel) -> Self {
        self.parallel = parallel;
        self
    }

    /// Says that the module costs far more per object than crossing threads
    /// (see [`ModuleEntry::costly`]).
    pub fn costly(mut self) -> Self {
        self.costly = true;
        self
    }

    /// An input, built from its options `O`.
    pub fn input<O: Options>(
        name: &'static str,
        summary: &'static str,
        make: impl Fn(O) -> Result<Box<dyn Producer>, StageError> + Send + Sync + 'static,
    ) -> Self {
        let factory = Factory::Input(Arc::new(move |opts: &StageOptions| make(opts.parse()?)));
        Self::with::<O>(name, summary, factory)
    }

    /// An output, built from its options `O`.
    pub fn output<O: Options>(
        name: &'static str,
        summary: &'static str,
        make: impl Fn(O) -> Result<Box<dyn Receiver>, StageError> + Send + Sync + 'static,
    ) -> Self {
        let factory = Factory::Output(Arc::new(move |opts: &StageOptions| make(opts.parse()?)));
        Self::with::<O>(name, summary, factory)
    }

    /// A filter with a push form (holding its downstream) and a pull form
    /// (holding its upstream), each built from the options `O`.
    pub fn filter<O: Options>(
        name: &'static str,
        summary: &'static str,
        push: impl Fn(O, Box<dyn Receiver>) -> Result<Box<dyn Receiver>, StageError>
            + Send
            + Sync
            + 'static,
        pull: impl Fn(O, Box<dyn Producer>) -> Result<Box<dyn Producer>, StageError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        let factory = Factory::Filter {
            push: Arc::new(move |opts: &StageOptions, next| push(opts.parse()?, next)),
            pull: Arc::new(move |opts: &StageOptions, prev| pull(opts.parse()?, prev)),
        };
        Self::with::<O>(name, summary, factory)
    }

    /// A one-to-one filter ([`Map`]), push and pull through [`MapStage`].
    pub fn map<O: Options, M: Map + 'static>(
        name: &'static str,
        summary: &'static str,
        make: impl Fn(O) -> Result<M, StageError> + Send + Sync + 'static,
    ) -> Self {
        let make = Arc::new(make);
        let pull_make = Arc::clone(&make);
        Self::filter::<O>(
            name,
            summary,
            move |o, next| Ok(Box::new(MapStage::new(make(o)?, next))),
            move |o, prev| Ok(Box::new(MapStage::new(pull_make(o)?, prev))),
        )
    }

    /// A flat-map filter ([`FlatMap`]), push and pull through [`FlatMapStage`].
    pub fn flat_map<O: Options, F: FlatMap + 'static>(
        name: &'static str,
        summary: &'static str,
        make: impl Fn(O) -> Result<F, StageError> + Send + Sync + 'static,
    ) -> Self {
        let make = Arc::new(make);
        let pull_make = Arc::clone(&make);
        Self::filter::<O>(
            name,
            summary,
            move |o, next| Ok(Box::new(FlatMapStage::new(make(o)?, next))),
            move |o, prev| Ok(Box::new(FlatMapStage::new(pull_make(o)?, prev))),
        )
    }

    /// A filter that runs the rest of the chain in worker threads (which
    /// read the input themselves when it was handed over in parts).
    pub fn split<O: Options>(
        name: &'static str,
        summary: &'static str,
        make: impl Fn(O, DownstreamBuilder, Option<InputParts>) -> Result<Box<dyn Receiver>, StageError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        let factory = Factory::Split(Arc::new(move |opts: &StageOptions, downstream, parts| {
            make(opts.parse()?, downstream, parts)
        }));
        Self::with::<O>(name, summary, factory)
    }
}

impl ModuleEntry {
    /// The module's role, from its factory.
    pub fn role(&self) -> Role {
        match self.factory {
            Factory::Input(_) => Role::Input,
            Factory::Filter { .. } | Factory::Split(_) => Role::Filter,
            Factory::Output(_) => Role::Output,
        }
    }
}

/// Dotted module names → entries.
#[derive(Clone, Default)]
pub struct Registry {
    modules: BTreeMap<&'static str, ModuleEntry>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or replaces) a module.
    pub fn add(&mut self, entry: ModuleEntry) -> &mut Self {
        self.modules.insert(entry.name, entry);
        self
    }

    /// The module named `name`.
    pub fn get(&self, name: &str) -> Option<&ModuleEntry> {
        self.modules.get(name)
    }

    /// Every module, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &ModuleEntry> {
        self.modules.values()
    }

    /// Every module name, sorted, comma-separated (for "unknown module" errors).
    pub fn names(&self) -> String {
        self.modules.keys().copied().collect::<Vec<_>>().join(", ")
    }
}
