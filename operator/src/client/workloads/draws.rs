//! The workloads' pseudo-random draws: a generator fast enough that drawing a key never costs
//! more than the engine spends storing it, seeded so that a run can be repeated key for key.

/// A small, fast generator for random keys (SplitMix64): the client must not spend more time
/// drawing a key than the engine spends storing it.
#[derive(Clone, Debug)]
pub struct KeyGenerator {
    state: u64,
}

impl KeyGenerator {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform draw from 0..bound (Lemire's multiply-shift; the bias is below 2^-40 for
    /// key spaces up to 10^12).
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}
