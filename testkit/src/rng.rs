//! A small seeded generator (xorshift64) for tests, so that
//! they need no crate: the same seed gives the same sequence.

/// One stream of pseudo-random numbers (a seed of 0 would give only 0).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}
