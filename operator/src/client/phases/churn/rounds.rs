//! What both ways of churning share (`keys`: whole items; `fields`: a hash record's fields):
//! the seeded draws deciding what a round deletes and overwrites, the one byte of state kept per
//! item or field, the shares asked, and the sending of a batch with its replies checked.

use crate::client::connection::resp::CommandBuffer;
use crate::client::connection::shards::LoadConnections;
use crate::client::workloads::draws::KeyGenerator;
use crate::error::BenchError;

/// Commands per batch of a round (one batch in flight: a round is not timed as a load is).
pub const CHURN_BATCH: usize = 200;

/// The most bytes a batch holds before it is sent, whatever its count: 200 overwrites of a
/// 64-field record with 1 MiB values would otherwise be a 12.5 GiB batch.
pub const MAX_BATCH_BYTES: usize = 4 << 20;

/// An item's (or a field's) state, one byte each.
pub const DELETED: u8 = 0;
pub const ORIGINAL: u8 = 1;
pub const OVERWRITTEN: u8 = 2;

/// The purposes a draw is made for.
pub const DELETE: u64 = 1;
pub const OVERWRITE: u64 = 2;

/// The draw deciding, for `item` in `round`, whether a share applies: a SplitMix64 of the
/// seed, the round, the purpose and the item, compared with the share.
pub fn drawn(seed: u64, round: u32, purpose: u64, item: u64, share: f64) -> bool {
    let mut generator = KeyGenerator::new(
        seed ^ (u64::from(round) << 48)
            ^ (purpose << 40)
            ^ item.wrapping_mul(0x9e37_79b9_7f4a_7c15),
    );
    let draw = generator.next_u64() >> 11;
    (draw as f64) < share * (1u64 << 53) as f64
}

/// Fails the round with `message` unless the engine's count (or its replies' sum) is the one
/// the states give: a key or element missing or added behind the churn's back.
pub fn check_count(
    found: u64,
    expected: u64,
    message: impl FnOnce() -> String,
) -> Result<(), BenchError> {
    if found == expected {
        Ok(())
    } else {
        Err(BenchError::CountMismatch { message: message() })
    }
}

/// What a round draws by: the seed, the shares and the overwrites' value size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shares {
    pub seed: u64,
    pub delete: Option<f64>,
    pub overwrite: Option<f64>,
    pub value_size: u32,
}

/// What a round of either kind does to one held item or field numbered `item`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Delete,
    Overwrite,
    Keep,
}

impl Shares {
    /// Deleted when the delete share's draw says so, else overwritten when the overwrite
    /// share's does: a round never overwrites what it deleted.
    pub fn change(&self, round: u32, item: u64) -> Change {
        if self
            .delete
            .is_some_and(|share| drawn(self.seed, round, DELETE, item, share))
        {
            Change::Delete
        } else if self
            .overwrite
            .is_some_and(|share| drawn(self.seed, round, OVERWRITE, item, share))
        {
            Change::Overwrite
        } else {
            Change::Keep
        }
    }
}

/// What one round did, counted by the client and checked against the engine's replies and
/// counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundOutcome {
    /// Items (a hash record's fields, when the churn works on them) deleted.
    pub deleted: u64,
    /// Items (fields) overwritten.
    pub overwritten: u64,
    /// Items (keys) held after the round, verified in the engine.
    pub items: u64,
    /// Elements held after the round, verified, where items hold them.
    pub elements: Option<u64>,
    /// How long the round's commands took (not its count).
    pub seconds: f64,
}

/// A batch being filled: its commands, the replies they owe, and the sum of the integer
/// replies of the batches already sent.
pub struct Batch {
    pub buffer: CommandBuffer,
    pub replies: usize,
    /// Items (or records) in the batch, counted against [`CHURN_BATCH`] by [`Batch::is_full`].
    pub entries: usize,
    pub sum: u64,
    owed: Vec<usize>,
}

impl Batch {
    pub fn new() -> Self {
        Self {
            buffer: CommandBuffer::with_capacity(64 * 1024),
            replies: 0,
            entries: 0,
            sum: 0,
            owed: Vec::new(),
        }
    }

    /// Whether the batch holds [`CHURN_BATCH`] entries or [`MAX_BATCH_BYTES`].
    pub fn is_full(&self) -> bool {
        self.entries >= CHURN_BATCH || self.buffer.as_bytes().len() >= MAX_BATCH_BYTES
    }

    /// Sends the batch when it [is full](Self::is_full).
    pub fn flush_when_full(
        &mut self,
        connections: &mut LoadConnections,
        what: &str,
    ) -> Result<(), BenchError> {
        if self.is_full() {
            self.flush(connections, what)?;
        }
        Ok(())
    }

    /// Sends the batch and adds its integer replies to `sum`; an error reply fails the round
    /// naming `what` (`churn round 2`) and the engine's words.
    pub fn flush(
        &mut self,
        connections: &mut LoadConnections,
        what: &str,
    ) -> Result<(), BenchError> {
        if self.replies == 0 {
            return Ok(());
        }
        let lost = |connections: &LoadConnections, failure| BenchError::ConnectionLost {
            items_sent: 0,
            detail: format!("{what}: {}", connections.describe(&failure)),
        };
        connections
            .send(&self.buffer, self.replies, &mut self.owed)
            .map_err(|f| lost(connections, f))?;
        let (tally, shard) = connections
            .read(&self.owed)
            .map_err(|f| lost(connections, f))?;
        if let Some(reply) = tally.first_error {
            return Err(BenchError::from_load_reply(
                what,
                reply,
                0,
                connections.address(shard),
            ));
        }
        self.sum += tally.integer_sum;
        self.buffer.clear();
        self.replies = 0;
        self.entries = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_draws_take_the_share_asked_and_are_the_same_for_the_same_seed() {
        let n = 200_000u64;
        let picked = (0..n).filter(|i| drawn(1, 1, DELETE, *i, 0.5)).count() as f64;
        // A binomial's standard deviation here is about 224: 5 of them.
        assert!((picked - 100_000.0).abs() < 1_120.0, "{picked}");
        let again = (0..n).filter(|i| drawn(1, 1, DELETE, *i, 0.5)).count() as f64;
        assert_eq!(picked, again);
        let other_round = (0..1000)
            .filter(|i| drawn(1, 1, DELETE, *i, 0.5) != drawn(1, 2, DELETE, *i, 0.5))
            .count();
        assert!(other_round > 300, "rounds draw apart: {other_round}");
    }

    #[test]
    fn a_batch_is_full_at_its_count_or_its_bytes_whichever_comes_first() {
        let mut batch = Batch::new();
        batch.entries = CHURN_BATCH - 1;
        assert!(!batch.is_full());
        batch.entries += 1;
        assert!(batch.is_full());
        let mut large = Batch::new();
        large.entries = 1;
        large.buffer.array(3).bulk(b"SET").bulk(b"k");
        large.buffer.bulk(&vec![b'x'; MAX_BATCH_BYTES]);
        assert!(large.is_full());
    }

    #[test]
    fn a_round_overwrites_only_what_it_did_not_delete() {
        let shares = Shares {
            seed: 1,
            delete: Some(0.5),
            overwrite: Some(1.0),
            value_size: 10,
        };
        for item in 0..1000 {
            let expected = if drawn(1, 1, DELETE, item, 0.5) {
                Change::Delete
            } else {
                Change::Overwrite
            };
            assert_eq!(shares.change(1, item), expected);
        }
    }
}
