//! Domain names on the wire: walking labels through compression pointers, and
//! printing them in presentation form.

use super::DnsError;

/// Longest name on the wire (RFC 1035 §2.3.4), length octets included.
pub const MAX_NAME: usize = 255;
/// Most compression pointers followed in one name. A real name cannot need
/// more than one pointer per label, and has at most 127 labels.
pub const MAX_POINTERS: usize = 127;

/// Walks the name at `start` in `msg`, calling `label` for each label (without
/// its length octet; the root's empty label is not passed). Returns the offset
/// just past the name *where it started* (after the first pointer, if any).
///
/// Forward pointers are accepted (RFC 1035 asks for prior occurrences, but
/// tshark and most resolvers follow them); loops and pointers outside the
/// message are errors.
#[inline]
pub fn walk<'m>(
    msg: &'m [u8],
    start: usize,
    mut label: impl FnMut(&'m [u8]),
) -> Result<usize, (DnsError, usize)> {
    let mut pos = start;
    let mut end = None;
    let mut wire_len = 1; // the root's length octet
    let mut pointers = 0;
    // Targets of the first pointers followed: a loop comes back to one. Past
    // these many pointers the hop limit decides (no real name needs more than a few).
    let mut seen = [0usize; 16];
    loop {
        let len = *msg.get(pos).ok_or((DnsError::LabelPastEnd, pos))? as usize;
        match len & 0xc0 {
            0x00 => {
                if len == 0 {
                    return Ok(end.unwrap_or(pos + 1));
                }
                let text = msg
                    .get(pos + 1..pos + 1 + len)
                    .ok_or((DnsError::LabelPastEnd, pos))?;
                wire_len += len + 1;
                if wire_len > MAX_NAME {
                    return Err((DnsError::NameTooLong, pos));
                }
                label(text);
                pos += 1 + len;
            }
            0xc0 => {
                let low = *msg.get(pos + 1).ok_or((DnsError::LabelPastEnd, pos))? as usize;
                let target = ((len & 0x3f) << 8) | low;
                if target >= msg.len() {
                    return Err((DnsError::PointerOutOfBounds, pos));
                }
                end.get_or_insert(pos + 2);
                let revisit = target == pos || seen[..pointers.min(seen.len())].contains(&target);
                if revisit || pointers >= MAX_POINTERS {
                    return Err((DnsError::PointerLoop, pos));
                }
                if let Some(slot) = seen.get_mut(pointers) {
                    *slot = target;
                }
                pointers += 1;
                pos = target;
            }
            _ => return Err((DnsError::ReservedLabelType, pos)),
        }
    }
}

/// The labels of the name at `start` (at most `out.len()` are kept), without
/// allocating. Returns how many labels the name has.
pub fn labels<'m>(
    msg: &'m [u8],
    start: usize,
    out: &mut [&'m [u8]],
) -> Result<usize, (DnsError, usize)> {
    let mut count = 0;
    walk(msg, start, |label: &'m [u8]| {
        if let Some(slot) = out.get_mut(count) {
            *slot = label;
        }
        count += 1;
    })?;
    Ok(count)
}

/// The offset just past the name at `start`, checking it fully.
#[inline]
pub fn skip(msg: &[u8], start: usize) -> Result<usize, (DnsError, usize)> {
    // Fast path for a name without compression (most QNAMEs): lengths only.
    let mut pos = start;
    while let Some(&len) = msg.get(pos) {
        match len {
            0 if pos + 1 - start <= MAX_NAME => return Ok(pos + 1),
            1..=63 => pos += 1 + usize::from(len),
            // A pointer, a reserved label type or an overlong name: the full walk decides.
            _ => break,
        }
    }
    walk(msg, start, |_| {})
}

/// Bytes a label shows as they are, and that are common: letters, digits,
/// `-` and `_` (a table: one load per byte on the per-name path).
static PLAIN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
        b += 1;
    }
    table
};

/// Is every byte of `label` a [`PLAIN`] one?
#[inline]
fn plain(label: &[u8]) -> bool {
    // Folded without an early exit: a short loop the compiler can unroll.
    label.iter().fold(true, |ok, &b| ok & PLAIN[usize::from(b)])
}

/// Appends one label in presentation form: `.` and `\` escaped with a
/// backslash, bytes outside `!`..`~` as `\DDD` (decimal), as in RFC 4343 / zone files.
pub fn push_label(label: &[u8], out: &mut Vec<u8>) {
    // Fast path for the usual letters, digits, `-` and `_`: nothing to escape.
    if plain(label) {
        out.extend_from_slice(label);
        return;
    }
    push_escaped(label, b".\\", 0x21, out);
}

/// Appends `text` with each byte of `special` escaped as `\X` and every byte
/// below `lowest` or above `~` as `\DDD` (decimal); the rest as it is.
pub(crate) fn push_escaped(text: &[u8], special: &[u8], lowest: u8, out: &mut Vec<u8>) {
    for &b in text {
        if special.contains(&b) {
            out.push(b'\\');
            out.push(b);
        } else if (lowest..=0x7e).contains(&b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'\\', b'0' + b / 100, b'0' + b / 10 % 10, b'0' + b % 10]);
        }
    }
}

/// Appends the name at `start` in presentation form: absolute, with a trailing
/// dot (the root is `.`). On error nothing is guaranteed about what was appended.
pub fn write(msg: &[u8], start: usize, out: &mut Vec<u8>) -> Result<usize, (DnsError, usize)> {
    let before = out.len();
    if let Some(end) = write_plain(msg, start, out) {
        return Ok(end);
    }
    out.truncate(before);
    write_walked(msg, start, out)
}

/// [`write`] without its fast path: every name through the full walk. For
/// the fuzz target and tests, which check that both give the same.
#[doc(hidden)]
pub fn write_walked(
    msg: &[u8],
    start: usize,
    out: &mut Vec<u8>,
) -> Result<usize, (DnsError, usize)> {
    let before = out.len();
    let end = walk(msg, start, |label| {
        push_label(label, out);
        out.push(b'.');
    })?;
    if out.len() == before {
        out.push(b'.');
    }
    Ok(end)
}

/// Labels walked by [`plain_root`] in its unrolled steps; longer names go on
/// in a loop.
const UNROLLED_LABELS: usize = 8;

/// Where the root label (the final zero) of the name at `start` is, and how
/// many labels come before it, for a name of plain labels: no compression
/// pointer, no label longer than 63. `None` for any other name, or one that
/// runs past the message. The name's length is not checked against
/// [`MAX_NAME`]: the caller does that.
///
/// Checking a query waits mostly on this walk, each length byte found from
/// the one before. The first [`UNROLLED_LABELS`] steps are unrolled so that
/// a step is one add and one load: `rest` moves on by the label's length,
/// and the `k` length bytes passed so far are the load's constant offset.
/// Written as a plain loop, a step is a load and two adds. It costs 13
/// instructions a packet more, and saves 1 to 3 % of the `dns-null`
/// chain's walking thread (`docs/benchmarks.md`, "The name walk unrolled").
#[inline(always)]
pub(crate) fn plain_root(msg: &[u8], start: usize) -> Option<(usize, usize)> {
    let mut rest = msg.get(start..)?;
    for k in 0..UNROLLED_LABELS {
        let len = *rest.get(k)?;
        if len == 0 {
            return Some((msg.len() - rest.len() + k, k));
        }
        if len > 63 {
            return None;
        }
        rest = rest.get(usize::from(len)..)?;
    }
    let mut pos = msg.len() - rest.len() + UNROLLED_LABELS;
    let mut labels = UNROLLED_LABELS;
    loop {
        let len = usize::from(*msg.get(pos)?);
        if len == 0 {
            return Some((pos, labels));
        }
        if len > 63 {
            return None;
        }
        labels += 1;
        pos += 1 + len;
    }
}

/// [`write`]'s fast path: a name without compression pointers whose labels
/// need no escaping (most QNAMEs). `None` (with nothing appended) when the
/// name is anything else; the full walk then decides.
///
/// Such a name's presentation form is its wire form without the first
/// length byte, with every other length byte and the final zero turned into
/// dots: one walk over the length bytes, one copy, a store per label, then
/// one pass over the copy that classes its bytes ([`DOTTED`]): the name is
/// plain when its only dots are the ones stored, one per label.
#[inline]
fn write_plain(msg: &[u8], start: usize, out: &mut Vec<u8>) -> Option<usize> {
    let (pos, labels) = plain_root(msg, start)?;
    if pos + 1 - start > MAX_NAME {
        return None;
    }
    if pos == start {
        out.push(b'.');
        return Some(pos + 1);
    }
    let first = out.len();
    out.extend_from_slice(&msg[start + 1..=pos]);
    let mut at = start;
    while at < pos {
        at += 1 + usize::from(msg[at]);
        // `at` is the next length byte (or the final zero): a dot.
        out[first + at - start - 1] = b'.';
    }
    if dotted_sum(&out[first..]) != labels as u32 {
        out.truncate(first);
        return None;
    }
    Some(pos + 1)
}

/// The class of a byte of a written name: 0 for a [`PLAIN`] byte, 1 for a
/// dot, and more than any name's dots (a name has at most 127) for anything
/// else, so that [`dotted_sum`] equals the name's label count only when its
/// labels are plain.
static DOTTED: [u16; 256] = {
    let mut table = [0x100; 256];
    let mut b = 0;
    while b < 256 {
        if PLAIN[b] {
            table[b] = 0;
        }
        b += 1;
    }
    table[b'.' as usize] = 1;
    table
};

/// The sum of the [`DOTTED`] classes of `text`'s bytes (eight at a time:
/// no branch per byte).
#[inline]
fn dotted_sum(text: &[u8]) -> u32 {
    let class = |b: u8| u32::from(DOTTED[usize::from(b)]);
    let mut chunks = text.chunks_exact(8);
    let mut sum = 0;
    for c in &mut chunks {
        sum += class(c[0]) + class(c[1]) + class(c[2]) + class(c[3]);
        sum += class(c[4]) + class(c[5]) + class(c[6]) + class(c[7]);
    }
    sum + chunks.remainder().iter().map(|&b| class(b)).sum::<u32>()
}

/// The name at `start` as a presentation string (allocates: not for the hot path).
pub fn to_string(msg: &[u8], start: usize) -> Result<String, (DnsError, usize)> {
    let mut out = Vec::new();
    write(msg, start, &mut out)?;
    // Presentation form is ASCII by construction.
    Ok(String::from_utf8_lossy(&out).into_owned())
}
