//! The test for ASCII capitals both builds' `string.lower` start with
//! (Lua 5.4's in `strings`, LuaJIT's in `view/jit.rs`), and the test that
//! each build's gives what the stock one gives.

/// Whether `bytes` has an ASCII upper-case letter: eight bytes at a time.
pub fn has_upper(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        // Each byte's low 7 bits: adding cannot carry into the next byte.
        let low = word & (0x7f * ONES);
        // High bit of each byte: >= b'A', and not > b'Z', and ASCII.
        let upper = (low + (128 - u64::from(b'A')) * ONES)
            & !(low + (127 - u64::from(b'Z')) * ONES)
            & !word
            & (0x80 * ONES);
        if upper != 0 {
            return true;
        }
    }
    chunks.remainder().iter().any(u8::is_ascii_uppercase)
}

#[cfg(test)]
mod tests {
    use super::has_upper;

    #[test]
    fn has_upper_agrees_with_the_byte_test_for_every_byte_at_every_place() {
        for len in [1usize, 7, 8, 9, 16, 17, 23] {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = b;
                    assert_eq!(
                        has_upper(&bytes),
                        b.is_ascii_uppercase(),
                        "{b:#x} at {at} of {len}"
                    );
                }
            }
        }
        assert!(!has_upper(b""));
    }

    #[test]
    fn string_lower_gives_what_the_stock_one_gives() {
        let ours = crate::state::new_state(&dnsluice_core::Registry::new(), &[]).unwrap();
        // The build's own string.lower (Lua 5.4's or LuaJIT's), in a state
        // without dnsluice's.
        let stock = mlua::Lua::new();
        let mut cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"www.example.com.".to_vec(),
            b"WWW.Example.COM.".to_vec(),
            b"\\065BC\\000".to_vec(),
            b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abc{|}~".to_vec(),
        ];
        cases.push((0..=255u8).collect());
        cases.push((0..=255u8).rev().collect());
        let lower = |lua: &mlua::Lua, s: &[u8]| -> Vec<u8> {
            let f: mlua::Function = lua
                .load("return string.lower(...)")
                .into_function()
                .unwrap();
            let r: mlua::LuaString = f.call(lua.create_string(s).unwrap()).unwrap();
            r.as_bytes().to_vec()
        };
        for case in &cases {
            assert_eq!(lower(&ours, case), lower(&stock, case), "{case:?}");
        }
        // Not strings: numbers as the stock one does, anything else the same error
        // (at the caller's line).
        let both = |code: &str| {
            let a: String = ours.load(code).set_name("=t").eval().unwrap();
            let b: String = stock.load(code).set_name("=t").eval().unwrap();
            assert_eq!(a, b, "{code}");
        };
        both("return string.lower(12.5)");
        both("return select(2, pcall(function() local s = string.lower({}) return s end))");
        both("return select(2, pcall(function() local s = string.lower(nil) return s end))");
        both("local s = 'MiXeD' return s:lower() .. s");
    }
}
