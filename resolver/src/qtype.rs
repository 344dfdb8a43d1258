//! What a lookup asks for: one record type, or one of ZDNS's modules
//! ([`ZDNS_MODULES`], the one list of their names: the parser, the help
//! text and the check of `docs/lookups.md` read it).

use dnsluice_core::dns::mnemonic;
use std::sync::OnceLock;

/// The record types named in help and error messages (any other mnemonic
/// known to the DNS module, or `TYPEnnn`, works too).
pub const COMMON_TYPES: &[&str] = &[
    "A", "AAAA", "NS", "MX", "TXT", "SOA", "PTR", "CNAME", "SRV", "CAA", "HTTPS", "ANY",
];

/// One of ZDNS's modules: the name `dnsluice lookup` takes and writes (in
/// ZDNS's `results` key) and the lookup it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZdnsModule {
    /// The name, as ZDNS spells it (`MXLOOKUP`).
    pub name: &'static str,
    /// What it looks up.
    pub lookup: LookupType,
}

impl ZdnsModule {
    /// The module `name` running `lookup`.
    pub const fn new(name: &'static str, lookup: LookupType) -> ZdnsModule {
        ZdnsModule { name, lookup }
    }
}

/// ZDNS's modules (and ours in their style: `CAALOOKUP`), in the order help
/// and `docs/lookups.md` list them. A new module is a row here
/// (ARCHITECTURE.md, "Adding a lookup module").
pub const ZDNS_MODULES: &[ZdnsModule] = &[
    ZdnsModule::new("ALOOKUP", LookupType::Addresses),
    ZdnsModule::new("NSLOOKUP", LookupType::NameServers),
    ZdnsModule::new("MXLOOKUP", LookupType::MailExchanges),
    ZdnsModule::new("AXFR", LookupType::Transfer),
    ZdnsModule::new("BINDVERSION", LookupType::BindVersion),
    ZdnsModule::new("SPF", LookupType::Spf),
    ZdnsModule::new("DMARC", LookupType::Dmarc),
    // Ours: ZDNS has no module for it.
    ZdnsModule::new("CAALOOKUP", LookupType::RelevantCaa),
];

/// The modules' names, comma-separated (`ALOOKUP, NSLOOKUP, ...`).
fn module_names() -> String {
    let names: Vec<&str> = ZDNS_MODULES.iter().map(|m| m.name).collect();
    names.join(", ")
}

/// The help of `dnsluice lookup`'s TYPE argument: the common record types
/// and every module.
pub fn argument_help() -> String {
    format!(
        "Record type: {}, TYPEnnn, or a module: {}. Same as --type.",
        COMMON_TYPES.join(", "),
        module_names()
    )
}

/// What a lookup type is, as option help shows it: `record type (A, AAAA,
/// NS, MX, TXT, ..., TYPEnnn) or module (ALOOKUP, NSLOOKUP, ...)`.
pub fn help_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "record type (A, AAAA, NS, MX, TXT, ..., TYPEnnn) or module ({})",
            module_names()
        )
    })
}

/// The question a lookup asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupType {
    /// One record type.
    Single(u16),
    /// `ALOOKUP`: A and AAAA, following CNAMEs.
    Addresses,
    /// `NSLOOKUP`: the name's NS records, each with its addresses.
    NameServers,
    /// `MXLOOKUP`: the name's MX records, each with its addresses.
    MailExchanges,
    /// `AXFR`: the zone's records, transferred from each of its nameservers.
    Transfer,
    /// `BINDVERSION`: the server's `version.bind` (CH TXT).
    BindVersion,
    /// `SPF`: the name's TXT record that starts `v=spf1`.
    Spf,
    /// `DMARC`: the name's TXT record that starts `v=DMARC1;`.
    Dmarc,
    /// `CAALOOKUP`: the CAA RRset relevant to the name (RFC 8659 §3), found
    /// by climbing from the name towards the root.
    RelevantCaa,
}

impl LookupType {
    /// Parses `A`, `aaaa`, `TYPE65`, `ALOOKUP`, ...
    pub fn parse(text: &str) -> Result<LookupType, String> {
        let upper = text.trim().to_ascii_uppercase();
        if let Some(module) = ZDNS_MODULES.iter().find(|m| m.name == upper) {
            return Ok(module.lookup);
        }
        mnemonic::rtype_from_str(&upper)
            .map(LookupType::Single)
            .ok_or_else(|| {
                format!(
                    "unknown record type `{text}` (for example {}, {}, or TYPEnnn)",
                    COMMON_TYPES.join(", "),
                    module_names()
                )
            })
    }
}

impl std::str::FromStr for LookupType {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        LookupType::parse(text)
    }
}

impl std::fmt::Display for LookupType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LookupType::Single(rtype) => f.write_str(&mnemonic::rtype(*rtype)),
            module => {
                let name = ZDNS_MODULES.iter().find(|m| m.lookup == *module);
                f.write_str(name.map_or("?", |m| m.name))
            }
        }
    }
}

dnsluice_options::text_option!(LookupType, help_text());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_by_name_and_number() {
        assert_eq!(LookupType::parse("a"), Ok(LookupType::Single(1)));
        assert_eq!(LookupType::parse("HTTPS"), Ok(LookupType::Single(65)));
        assert_eq!(LookupType::parse("CAA"), Ok(LookupType::Single(257)));
        assert_eq!(LookupType::parse("ANY"), Ok(LookupType::Single(255)));
        assert_eq!(LookupType::parse("TYPE99"), Ok(LookupType::Single(99)));
        assert_eq!(LookupType::parse("alookup"), Ok(LookupType::Addresses));
        assert!(LookupType::parse("BOGUS").unwrap_err().contains("ALOOKUP"));
        assert_eq!(LookupType::Single(65).to_string(), "HTTPS");
        assert_eq!(LookupType::Addresses.to_string(), "ALOOKUP");
        // AXFR is the module (a transfer over TCP), not a question of type 252.
        assert_eq!(LookupType::parse("axfr"), Ok(LookupType::Transfer));
        for module in ZDNS_MODULES {
            assert_eq!(LookupType::parse(module.name), Ok(module.lookup));
            assert_eq!(module.lookup.to_string(), module.name);
        }
    }

    #[test]
    fn help_and_errors_name_every_module() {
        assert_eq!(
            help_text(),
            "record type (A, AAAA, NS, MX, TXT, ..., TYPEnnn) or module \
             (ALOOKUP, NSLOOKUP, MXLOOKUP, AXFR, BINDVERSION, SPF, DMARC, CAALOOKUP)"
        );
        assert_eq!(
            LookupType::parse("BOGUS").unwrap_err(),
            "unknown record type `BOGUS` (for example A, AAAA, NS, MX, TXT, SOA, PTR, \
             CNAME, SRV, CAA, HTTPS, ANY, ALOOKUP, NSLOOKUP, MXLOOKUP, AXFR, BINDVERSION, \
             SPF, DMARC, CAALOOKUP, or TYPEnnn)"
        );
    }

    /// The names in the first column of `docs/lookups.md`'s table of modules.
    fn documented_modules() -> Vec<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/lookups.md");
        let text = std::fs::read_to_string(path).expect("docs/lookups.md");
        text.lines()
            .skip_while(|line| !line.starts_with("| module | asks |"))
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .filter_map(|line| line.split('`').nth(1).map(str::to_string))
            .collect()
    }

    #[test]
    fn docs_list_exactly_the_modules_of_the_table() {
        let names: Vec<&str> = ZDNS_MODULES.iter().map(|m| m.name).collect();
        assert_eq!(
            documented_modules(),
            names,
            "docs/lookups.md's table of modules (\"| module | asks |\") must list ZDNS_MODULES"
        );
    }
}
