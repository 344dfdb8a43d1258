//! What a lookup asks for: one record type, or one of ZDNS's modules
//! (`ALOOKUP`, `NSLOOKUP`, `MXLOOKUP`, `AXFR`, `BINDVERSION`, `SPF`, `DMARC`).

use dnsluice_core::dns::mnemonic;

/// The record types `dnsluice lookup` accepts by name (any other mnemonic known
/// to the DNS module, or `TYPEnnn`, works too).
pub const COMMON_TYPES: &[&str] = &[
    "A",
    "AAAA",
    "NS",
    "MX",
    "TXT",
    "SOA",
    "PTR",
    "CNAME",
    "SRV",
    "CAA",
    "HTTPS",
    "ANY",
    "ALOOKUP",
    "NSLOOKUP",
    "MXLOOKUP",
    "AXFR",
    "BINDVERSION",
    "SPF",
    "DMARC",
];

/// The modules by name, as ZDNS names them.
const MODULES: &[(&str, LookupType)] = &[
    ("ALOOKUP", LookupType::Addresses),
    ("NSLOOKUP", LookupType::NameServers),
    ("MXLOOKUP", LookupType::MailExchanges),
    ("AXFR", LookupType::Transfer),
    ("BINDVERSION", LookupType::BindVersion),
    ("SPF", LookupType::Spf),
    ("DMARC", LookupType::Dmarc),
];

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
}

impl LookupType {
    /// Parses `A`, `aaaa`, `TYPE65`, `ALOOKUP`, ...
    pub fn parse(text: &str) -> Result<LookupType, String> {
        let upper = text.trim().to_ascii_uppercase();
        if let Some((_, module)) = MODULES.iter().find(|(name, _)| *name == upper) {
            return Ok(*module);
        }
        mnemonic::rtype_from_str(&upper)
            .map(LookupType::Single)
            .ok_or_else(|| {
                format!(
                    "unknown record type `{text}` (for example {}, or TYPEnnn)",
                    COMMON_TYPES.join(", ")
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
                let name = MODULES.iter().find(|(_, m)| m == module).map(|(n, _)| *n);
                f.write_str(name.unwrap_or("?"))
            }
        }
    }
}

dnsluice_options::text_option!(
    LookupType,
    "record type (A, AAAA, NS, MX, TXT, ..., TYPEnnn) or module (ALOOKUP, NSLOOKUP, MXLOOKUP, AXFR, BINDVERSION, SPF, DMARC)"
);

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
        for (name, module) in MODULES {
            assert_eq!(LookupType::parse(name), Ok(*module));
            assert_eq!(module.to_string(), *name);
        }
    }
}
