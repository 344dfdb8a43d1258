//! Names of DNS numbers: types, classes, rcodes, opcodes, EDNS options.
//! Unknown values use the RFC 3597 forms `TYPE65534` / `CLASS32`.

use std::borrow::Cow;

/// TYPE names from the IANA registry (those in common use).
const TYPES: &[(u16, &str)] = &[
    (1, "A"),
    (2, "NS"),
    (3, "MD"),
    (4, "MF"),
    (5, "CNAME"),
    (6, "SOA"),
    (7, "MB"),
    (8, "MG"),
    (9, "MR"),
    (10, "NULL"),
    (11, "WKS"),
    (12, "PTR"),
    (13, "HINFO"),
    (14, "MINFO"),
    (15, "MX"),
    (16, "TXT"),
    (17, "RP"),
    (18, "AFSDB"),
    (19, "X25"),
    (20, "ISDN"),
    (21, "RT"),
    (22, "NSAP"),
    (23, "NSAP-PTR"),
    (24, "SIG"),
    (25, "KEY"),
    (26, "PX"),
    (27, "GPOS"),
    (28, "AAAA"),
    (29, "LOC"),
    (30, "NXT"),
    (33, "SRV"),
    (35, "NAPTR"),
    (36, "KX"),
    (37, "CERT"),
    (38, "A6"),
    (39, "DNAME"),
    (41, "OPT"),
    (42, "APL"),
    (43, "DS"),
    (44, "SSHFP"),
    (45, "IPSECKEY"),
    (46, "RRSIG"),
    (47, "NSEC"),
    (48, "DNSKEY"),
    (49, "DHCID"),
    (50, "NSEC3"),
    (51, "NSEC3PARAM"),
    (52, "TLSA"),
    (53, "SMIMEA"),
    (55, "HIP"),
    (59, "CDS"),
    (60, "CDNSKEY"),
    (61, "OPENPGPKEY"),
    (62, "CSYNC"),
    (63, "ZONEMD"),
    (64, "SVCB"),
    (65, "HTTPS"),
    (99, "SPF"),
    (108, "EUI48"),
    (109, "EUI64"),
    (249, "TKEY"),
    (250, "TSIG"),
    (251, "IXFR"),
    (252, "AXFR"),
    (253, "MAILB"),
    (254, "MAILA"),
    (255, "ANY"),
    (256, "URI"),
    (257, "CAA"),
    (32768, "TA"),
    (32769, "DLV"),
];

/// The mnemonic of a TYPE (`A`, `AAAA`, ..., else `TYPE65534`).
pub fn rtype(value: u16) -> Cow<'static, str> {
    match TYPES.iter().find(|(v, _)| *v == value) {
        Some((_, name)) => Cow::Borrowed(name),
        None => Cow::Owned(format!("TYPE{value}")),
    }
}

/// The TYPE for a mnemonic or an RFC 3597 `TYPEnnn` (case-insensitive).
pub fn rtype_from_str(text: &str) -> Option<u16> {
    let upper = text.to_ascii_uppercase();
    TYPES
        .iter()
        .find(|(_, name)| *name == upper)
        .map(|(v, _)| *v)
        .or_else(|| upper.strip_prefix("TYPE")?.parse().ok())
}

/// The mnemonic of a CLASS (`IN`, `CH`, `HS`, `NONE`, `ANY`, else `CLASS32`).
pub fn class(value: u16) -> Cow<'static, str> {
    Cow::Borrowed(match value {
        1 => "IN",
        3 => "CH",
        4 => "HS",
        254 => "NONE",
        255 => "ANY",
        _ => return Cow::Owned(format!("CLASS{value}")),
    })
}

const RCODES: &[(u16, &str)] = &[
    (0, "NOERROR"),
    (1, "FORMERR"),
    (2, "SERVFAIL"),
    (3, "NXDOMAIN"),
    (4, "NOTIMP"),
    (5, "REFUSED"),
    (6, "YXDOMAIN"),
    (7, "YXRRSET"),
    (8, "NXRRSET"),
    (9, "NOTAUTH"),
    (10, "NOTZONE"),
    (11, "DSOTYPENI"),
    (16, "BADVERS"),
    (17, "BADKEY"),
    (18, "BADTIME"),
    (19, "BADMODE"),
    (20, "BADNAME"),
    (21, "BADALG"),
    (22, "BADTRUNC"),
    (23, "BADCOOKIE"),
];

/// The mnemonic of an RCODE (extended values included; else `RCODE42`).
pub fn rcode(value: u16) -> Cow<'static, str> {
    match RCODES.iter().find(|(v, _)| *v == value) {
        Some((_, name)) => Cow::Borrowed(name),
        None => Cow::Owned(format!("RCODE{value}")),
    }
}

/// The RCODE for a mnemonic or `RCODEnnn` or a number (case-insensitive).
pub fn rcode_from_str(text: &str) -> Option<u16> {
    let upper = text.to_ascii_uppercase();
    RCODES
        .iter()
        .find(|(_, name)| *name == upper)
        .map(|(v, _)| *v)
        .or_else(|| upper.strip_prefix("RCODE").unwrap_or(&upper).parse().ok())
}

const OPCODES: &[(u8, &str)] = &[
    (0, "QUERY"),
    (1, "IQUERY"),
    (2, "STATUS"),
    (4, "NOTIFY"),
    (5, "UPDATE"),
    (6, "DSO"),
];

/// The mnemonic of an OPCODE (else `OPCODE3`).
pub fn opcode(value: u8) -> Cow<'static, str> {
    match OPCODES.iter().find(|(v, _)| *v == value) {
        Some((_, name)) => Cow::Borrowed(name),
        None => Cow::Owned(format!("OPCODE{value}")),
    }
}

/// The OPCODE for a mnemonic or `OPCODEn` or a number (case-insensitive).
pub fn opcode_from_str(text: &str) -> Option<u8> {
    let upper = text.to_ascii_uppercase();
    OPCODES
        .iter()
        .find(|(_, name)| *name == upper)
        .map(|(v, _)| *v)
        .or_else(|| upper.strip_prefix("OPCODE").unwrap_or(&upper).parse().ok())
}

/// The name of an EDNS option code, when it has a well-known one.
pub fn edns_option(code: u16) -> Option<&'static str> {
    Some(match code {
        3 => "NSID",
        5 => "DAU",
        6 => "DHU",
        7 => "N3U",
        8 => "ECS",
        9 => "EXPIRE",
        10 => "COOKIE",
        11 => "TCP-KEEPALIVE",
        12 => "PADDING",
        13 => "CHAIN",
        14 => "KEY-TAG",
        15 => "EDE",
        _ => return None,
    })
}
