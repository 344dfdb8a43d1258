//! How lookup records are written: dnsluice's own shape or ZDNS 2.x's
//! (`--output-format`), and how much of each (`--result-verbosity`, as
//! ZDNS's: short, normal, long, trace).

use super::qtype::LookupType;

/// The shape of the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, dnsluice_options::Choice)]
pub enum OutputFormat {
    /// dnsluice's: `name`, `status`, `data`, `attempts`, `duration_ms`, ...
    #[default]
    Native,
    /// ZDNS 2.x's: `name` and `results.<MODULE>.{status,data,timestamp,duration}`.
    Zdns,
}

/// How much each record says (ZDNS's groups of fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default, dnsluice_options::Choice)]
pub enum Verbosity {
    /// Records without TTLs; no protocol, resolver or flags.
    Short,
    /// TTLs, protocol and resolver (dnsluice's records also carry flags).
    #[default]
    Normal,
    /// Also the header flags and the record's class (ZDNS's shape).
    Long,
    /// Also every exchange: the server asked, what came back, how long it took.
    Trace,
}

/// What a record writer needs to know besides the outcome.
#[derive(Clone, Copy, Debug)]
pub struct RecordStyle {
    /// The shape.
    pub format: OutputFormat,
    /// How much.
    pub verbosity: Verbosity,
    /// The lookup (ZDNS's `results` key: `A`, `MXLOOKUP`, ...).
    pub module: LookupType,
}

impl RecordStyle {
    /// Whether TTLs, protocol and resolver are written.
    pub fn normal(&self) -> bool {
        self.verbosity >= Verbosity::Normal
    }

    /// Whether ZDNS's long fields (flags, class) are written.
    pub fn long(&self) -> bool {
        self.verbosity >= Verbosity::Long
    }

    /// Whether the exchanges are recorded and written.
    pub fn trace(&self) -> bool {
        self.verbosity == Verbosity::Trace
    }

    /// Whether the shape is ZDNS's.
    pub fn zdns(&self) -> bool {
        self.format == OutputFormat::Zdns
    }
}

impl Default for RecordStyle {
    fn default() -> Self {
        RecordStyle {
            format: OutputFormat::Native,
            verbosity: Verbosity::Normal,
            module: LookupType::Single(1),
        }
    }
}
