//! Domain names as the resolver compares them: wire form, lower-cased
//! (RFC 4343: names compare case-insensitively), so equality, hashing and
//! "is at or below this zone" are byte operations on whole labels.

use dnsluice_core::dns;
use std::fmt;

/// A domain name in lower-cased, uncompressed wire form (labels with their
/// length octets, ending with the root's zero octet).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Box<[u8]>);

impl Name {
    /// The root, `.`.
    pub fn root() -> Name {
        Name(Box::new([0]))
    }

    /// Parses a name in presentation form (`www.example.com`, with or
    /// without the trailing dot, `\.` and `\DDD` escapes).
    pub fn parse(text: &str) -> Result<Name, dnsluice_net::query::NameError> {
        let mut wire = Vec::with_capacity(text.len() + 2);
        dnsluice_net::query::push_name(text, &mut wire)?;
        Ok(Name::from_wire(wire))
    }

    /// Reads the (possibly compressed) name at `at` in `msg`; the name and
    /// the offset just past it where it started.
    pub fn from_message(msg: &[u8], at: usize) -> Option<(Name, usize)> {
        let mut wire = Vec::with_capacity(32);
        let end = dns::name::walk(msg, at, |label| {
            wire.push(label.len() as u8);
            wire.extend_from_slice(label);
        })
        .ok()?;
        wire.push(0);
        Some((Name::from_wire(wire), end))
    }

    fn from_wire(mut wire: Vec<u8>) -> Name {
        // Length octets are at most 63, below `A`: lower-casing leaves them be.
        wire.make_ascii_lowercase();
        Name(wire.into_boxed_slice())
    }

    /// The wire form (lower-cased, uncompressed).
    pub fn wire(&self) -> &[u8] {
        &self.0
    }

    /// The labels, leftmost first (the root's empty label not included).
    pub fn labels(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut pos = 0;
        std::iter::from_fn(move || {
            let len = usize::from(*self.0.get(pos)?);
            if len == 0 {
                return None;
            }
            let label = self.0.get(pos + 1..pos + 1 + len)?;
            pos += 1 + len;
            Some(label)
        })
    }

    /// How many labels (0 for the root).
    pub fn label_count(&self) -> usize {
        self.labels().count()
    }

    /// Whether this is the root.
    pub fn is_root(&self) -> bool {
        self.0.len() == 1
    }

    /// The name one label up; `None` for the root.
    pub fn parent(&self) -> Option<Name> {
        let first = usize::from(*self.0.first()?);
        if first == 0 {
            return None;
        }
        Some(Name(self.0[1 + first..].into()))
    }

    /// This name, its parent, and so on up to the root.
    pub fn ancestors(&self) -> impl Iterator<Item = Name> {
        let mut next = Some(self.clone());
        std::iter::from_fn(move || {
            let current = next.take()?;
            next = current.parent();
            Some(current)
        })
    }

    /// Whether this name is `zone` or below it (a name is in the bailiwick
    /// of every zone it is at or below).
    pub fn is_at_or_below(&self, zone: &Name) -> bool {
        let (mine, theirs) = (&self.0, &zone.0);
        if theirs.len() > mine.len() {
            return false;
        }
        let start = mine.len() - theirs.len();
        // The suffix must begin on a label boundary.
        mine[start..] == theirs[..] && self.label_starts().any(|at| at == start)
    }

    /// Whether this name is strictly below `zone`.
    pub fn is_below(&self, zone: &Name) -> bool {
        self.0.len() > zone.0.len() && self.is_at_or_below(zone)
    }

    /// Offsets at which labels start (the root's zero octet included).
    fn label_starts(&self) -> impl Iterator<Item = usize> + '_ {
        let mut pos = Some(0usize);
        std::iter::from_fn(move || {
            let at = pos?;
            let len = usize::from(*self.0.get(at)?);
            pos = (len != 0).then_some(at + 1 + len);
            Some(at)
        })
    }

    /// DNAME substitution (RFC 6672 §2.2): this name with its suffix `owner`
    /// replaced by `target`; `None` when it is not strictly below `owner` or
    /// the result is longer than 255 octets.
    pub fn substitute(&self, owner: &Name, target: &Name) -> Option<Name> {
        if !self.is_below(owner) {
            return None;
        }
        let keep = self.0.len() - owner.0.len();
        let mut wire = Vec::with_capacity(keep + target.0.len());
        wire.extend_from_slice(&self.0[..keep]);
        wire.extend_from_slice(&target.0);
        (wire.len() <= dns::name::MAX_NAME).then(|| Name(wire.into_boxed_slice()))
    }

    /// Presentation form with the trailing dot (`.` for the root).
    pub fn to_text(&self) -> String {
        let mut out = Vec::with_capacity(self.0.len() + 1);
        for label in self.labels() {
            dns::name::push_label(label, &mut out);
            out.push(b'.');
        }
        if out.is_empty() {
            out.push(b'.');
        }
        // push_label writes ASCII only.
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name({})", self.to_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    #[test]
    fn bailiwick_is_whole_labels() {
        assert!(n("www.Example.COM").is_at_or_below(&n("example.com.")));
        assert!(n("example.com").is_at_or_below(&n("example.com")));
        assert!(!n("example.com").is_below(&n("example.com")));
        assert!(n("a.b").is_below(&Name::root()));
        // `xample.com` is a suffix of the bytes but not of the labels.
        assert!(!n("www.example.com").is_at_or_below(&n("xample.com")));
        assert!(!n("badexample.com").is_at_or_below(&n("example.com")));
        assert!(!n("com").is_at_or_below(&n("example.com")));
    }

    #[test]
    fn parents_labels_and_text() {
        let name = n("www.example.com.");
        assert_eq!(name.label_count(), 3);
        assert_eq!(name.parent().unwrap(), n("example.com"));
        let up: Vec<String> = name.ancestors().map(|a| a.to_text()).collect();
        assert_eq!(up, ["www.example.com.", "example.com.", "com.", "."]);
        assert_eq!(Name::root().parent(), None);
        assert_eq!(n("a\\.b.c").to_text(), "a\\.b.c.");
    }

    #[test]
    fn dname_substitution() {
        let got = n("www.old.example").substitute(&n("old.example"), &n("new.test"));
        assert_eq!(got.unwrap(), n("www.new.test"));
        // The owner itself is not substituted (RFC 6672 §2.3).
        assert_eq!(
            n("old.example").substitute(&n("old.example"), &n("new.test")),
            None
        );
        let long_target = n(&vec!["a".repeat(62); 4].join("."));
        assert_eq!(
            n("x.y.old").substitute(&n("old"), &long_target),
            None,
            "longer than 255 octets"
        );
    }

    #[test]
    fn names_from_messages_are_lower_cased_through_pointers() {
        // "Example.COM" at 0, then "WWW" + pointer to 0.
        let msg = b"\x07Example\x03COM\x00\x03WWW\xc0\x00";
        let (name, end) = Name::from_message(msg, 13).unwrap();
        assert_eq!(name, n("www.example.com"));
        assert_eq!(end, 19);
    }
}
