//! Appending the short byte strings a JSON line is made of, fast.
//!
//! A line of `output.json` is some forty short pieces: keys, numbers,
//! mnemonics, addresses, names. Appended with `extend_from_slice`, each
//! piece whose length the compiler does not know is a call into the C
//! library's `memcpy` (a seventh of a JSON run's time went there, in calls
//! that each moved a few bytes). [`push_short`] copies up to 16 bytes as
//! two overlapping fixed-size stores instead, the way `memcpy` does it
//! inside, without the call (and without `extend_from_slice`'s checks:
//! the stores are unchecked, after one `reserve`); [`clean_word`] lets a string be copied eight
//! bytes at a time when none of them needs an escape.

/// Appends `bytes` to `out`; a slice of at most 16 bytes is copied as two
/// overlapping 8-byte (or 4-byte) stores, with no call.
#[inline(always)]
pub fn push_short(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len());
    let start = out.len();
    #[allow(unsafe_code)]
    // SAFETY: `reserve` made room for `bytes.len()` bytes after `start`,
    // which `store_short` writes, every one of them.
    unsafe {
        store_short(out.as_mut_ptr().add(start), bytes);
        out.set_len(start + bytes.len());
    }
}

/// Appends the first `len` bytes of `bytes` (a table's entry padded to
/// `N`) as one copy of all `N` bytes into room `reserve` made, without a
/// call for a length known only at run time; the bytes past `len` land in
/// the spare capacity, outside the vector. `len` is at most `N`.
#[inline(always)]
pub fn push_padded<const N: usize>(out: &mut Vec<u8>, bytes: &[u8; N], len: usize) {
    let len = len.min(N);
    out.reserve(N);
    let start = out.len();
    #[allow(unsafe_code)]
    // SAFETY: `reserve` made room for `N` bytes after `start`, all of which
    // the copy writes; the length grows by `len <= N` of them.
    unsafe {
        out.as_mut_ptr()
            .add(start)
            .cast::<[u8; N]>()
            .write_unaligned(*bytes);
        out.set_len(start + len);
    }
}

/// Stores `bytes` at `dst`: up to 16 bytes as two overlapping stores of 8
/// (or 4) bytes, its first bytes and its last, without a call; three or
/// fewer one by one; a longer slice with `copy_nonoverlapping`.
///
/// # Safety
///
/// `dst` must be valid for writes of `bytes.len()` bytes (and not overlap
/// `bytes`). Exactly those bytes are written.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) unsafe fn store_short(dst: *mut u8, bytes: &[u8]) {
    let n = bytes.len();
    // SAFETY (each arm): the stores write `dst..dst + n` only, which the
    // caller vouches for: a head of `W` bytes and a tail of `W` ending at
    // `n` (`W <= n`), or single bytes below `n`.
    unsafe {
        if n > 16 {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n);
        } else if let (Some(head), Some(tail)) = (bytes.first_chunk::<8>(), bytes.last_chunk::<8>())
        {
            dst.cast::<[u8; 8]>().write_unaligned(*head);
            dst.add(n - 8).cast::<[u8; 8]>().write_unaligned(*tail);
        } else if let (Some(head), Some(tail)) = (bytes.first_chunk::<4>(), bytes.last_chunk::<4>())
        {
            dst.cast::<[u8; 4]>().write_unaligned(*head);
            dst.add(n - 4).cast::<[u8; 4]>().write_unaligned(*tail);
        } else {
            for (at, &b) in bytes.iter().enumerate() {
                dst.add(at).write(b);
            }
        }
    }
}

/// Appends `value` in decimal, each digit stored straight into `out`
/// (digits put together in a buffer of their own and copied out after, as
/// `itoa` does, made the UDP dump about 8 % slower: five alternating rounds).
#[inline]
pub fn push_u64(out: &mut Vec<u8>, value: u64) {
    let len = value.checked_ilog10().unwrap_or(0) as usize + 1;
    out.reserve(len);
    let start = out.len();
    let mut rest = value;
    for slot in out.spare_capacity_mut()[..len].iter_mut().rev() {
        slot.write(b'0' + (rest % 10) as u8);
        rest /= 10;
    }
    #[allow(unsafe_code)]
    // SAFETY: the loop wrote the first `len` bytes of the spare capacity.
    unsafe {
        out.set_len(start + len);
    }
}

/// Whether none of the eight bytes of `word` is written escaped in a JSON
/// string (a quote, a backslash, a control byte below 0x20, or 0x7f).
/// Bit tricks on the word: a byte is flagged when it is below 0x20 or,
/// after an exclusive or, zero; no byte is missed (a borrow can only flag
/// bytes above a flagged one, which does not change the answer).
#[inline(always)]
pub fn clean_word(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGHS;
    let control = below(word, 0x20);
    let quote = below(word ^ (ONES * u64::from(b'"')), 1);
    let backslash = below(word ^ (ONES * u64::from(b'\\')), 1);
    let delete = below(word ^ (ONES * 0x7f), 1);
    control | quote | backslash | delete == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers of every length, and the ends of u64, as the standard
    /// library writes them.
    #[test]
    fn numbers_are_written_as_the_standard_library_writes_them() {
        let mut values = vec![0, 1, 9, 10, 99, 100, u64::MAX, u64::MAX - 1];
        values.extend((0..20).map(|p| 10u64.pow(p)));
        values.extend((1..20).map(|p| 10u64.pow(p) - 1));
        values.extend((0..64).map(|b| (1u64 << b) + 12345));
        for value in values {
            let mut out = b"x".to_vec();
            push_u64(&mut out, value);
            assert_eq!(out, format!("x{value}").as_bytes());
        }
    }

    /// Every length from 0 to 40, appended after every prefix length from
    /// 0 to 20: the bytes are the slice's, in order, and nothing else.
    #[test]
    fn a_short_copy_appends_exactly_the_slice() {
        let source: Vec<u8> = (1..=40).collect();
        for before in 0..20 {
            for n in 0..=40 {
                let mut out: Vec<u8> = vec![0xee; before];
                push_short(&mut out, &source[..n]);
                let mut expected = vec![0xee; before];
                expected.extend_from_slice(&source[..n]);
                assert_eq!(out, expected, "{before} bytes before, {n} appended");
            }
        }
    }

    /// Every length of a padded entry, after every prefix length: exactly
    /// the entry's first bytes; a length past the entry is cut to it.
    #[test]
    fn a_padded_entry_appends_exactly_its_first_bytes() {
        let entry: [u8; 24] = std::array::from_fn(|i| i as u8 + 1);
        for before in 0..20 {
            for len in 0..=30 {
                let mut out: Vec<u8> = vec![0xee; before];
                push_padded(&mut out, &entry, len);
                let mut expected = vec![0xee; before];
                expected.extend_from_slice(&entry[..len.min(24)]);
                assert_eq!(out, expected, "{before} bytes before, {len} of the entry");
            }
        }
    }

    /// For every byte value in every place of a word of otherwise plain
    /// bytes (and of plain bytes above 0x80), the word is clean exactly when
    /// the byte needs no escape.
    #[test]
    fn a_word_is_clean_exactly_when_no_byte_needs_an_escape() {
        let needs_escape = |b: u8| matches!(b, b'"' | b'\\' | 0..=0x1f | 0x7f);
        for filler in [b'a', 0xc3, b'~', b' '] {
            for place in 0..8 {
                for b in 0..=255u8 {
                    let mut bytes = [filler; 8];
                    bytes[place] = b;
                    let word = u64::from_le_bytes(bytes);
                    assert_eq!(
                        clean_word(word),
                        !needs_escape(b),
                        "byte {b:#04x} at {place} among {filler:#04x}"
                    );
                }
            }
        }
        // Two special bytes next to each other, and one after a borrow.
        assert!(!clean_word(u64::from_le_bytes(*b"\0\"abcdef")));
        assert!(!clean_word(u64::from_le_bytes(*b"a\x01\x7fbcdef")));
    }
}
