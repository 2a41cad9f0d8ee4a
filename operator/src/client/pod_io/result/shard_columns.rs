//! A sharded cluster's figures in the compact result: each shard's median baseline and final
//! used_memory and its keys, as three columns in shard (`--addr`) order. The report's
//! `summary.shards` ([`ShardSpread`]) is rebuilt from them, ratios included, so the message
//! carries each figure once. [`MAX_SHARDS`] shards fit the budget beside 100 repetitions.

use serde::{Deserialize, Serialize};

use crate::client::connection::shards::MAX_SHARDS;
use crate::client::measurement::measured::ShardSpread;

/// Each shard's median figures over the verified repetitions, one column per figure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardColumns {
    /// used_memory before the load.
    pub baseline: Vec<u64>,
    /// used_memory after the load.
    pub used: Vec<u64>,
    /// Keys held after the load (DBSIZE).
    pub keys: Vec<u64>,
}

impl ShardColumns {
    pub fn of(spread: &ShardSpread) -> Self {
        Self {
            baseline: spread.baseline_used_memory.clone(),
            used: spread.used_memory.clone(),
            keys: spread.keys.clone(),
        }
    }

    /// The spread the columns hold, as the report's summary has it.
    pub fn spread(&self) -> ShardSpread {
        ShardSpread::from_medians(self.baseline.clone(), self.used.clone(), self.keys.clone())
    }

    /// Whether the columns are what a client sends: 2 to [`MAX_SHARDS`] shards, every column
    /// as long.
    pub fn check(&self) -> Result<(), String> {
        let shards = self.baseline.len();
        if !(2..=MAX_SHARDS).contains(&shards) {
            return Err(format!(
                "shards lists {shards} shards, not 2 to the {MAX_SHARDS} a client joins"
            ));
        }
        if self.used.len() != shards || self.keys.len() != shards {
            return Err(format!(
                "shards' columns disagree in length ({shards} baselines, {} used_memory, {} key counts)",
                self.used.len(),
                self.keys.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::report;
    use super::super::{BUDGET, ClientResult};
    use super::*;
    use crate::client::measurement::measured::{ShardReading, Summary};
    use crate::stats::StabilityThresholds;

    #[test]
    fn the_most_shards_fit_beside_a_hundred_repetitions_and_read_back() {
        let mut report = report(100, false);
        for repetition in &mut report.repetitions {
            let shards = MAX_SHARDS as u64;
            repetition.shards = (0..shards)
                .map(|i| ShardReading {
                    shard: i as u32,
                    address: format!("198.18.0.{}:6379", 10 + i),
                    baseline_used_memory: repetition.baseline_used_memory / shards + i * 1_001,
                    used_memory: repetition.used_memory / shards + i * 987_654,
                    keys: repetition.items / shards + i * 37,
                })
                .collect();
        }
        report.summary = Summary::of(&report.repetitions, &StabilityThresholds::default());
        let spread = report.summary.as_ref().unwrap().shards.clone().unwrap();
        let message = ClientResult::from_report(&report).to_message();
        assert!(message.len() <= BUDGET, "{} bytes", message.len());
        let read = ClientResult::read(&message, 100).unwrap();
        assert_eq!(read.omitted, 0, "every repetition still listed");
        let columns = read.shards.expect("the shards' figures travel");
        assert_eq!(columns.spread(), spread);
        assert_eq!(columns.baseline.len(), MAX_SHARDS);
    }

    #[test]
    fn columns_of_the_wrong_size_are_refused() {
        let one = ShardColumns {
            baseline: vec![1],
            used: vec![2],
            keys: vec![3],
        };
        assert!(one.check().unwrap_err().contains("1 shards"));
        let uneven = ShardColumns {
            baseline: vec![1, 1],
            used: vec![2],
            keys: vec![3, 3],
        };
        assert!(uneven.check().unwrap_err().contains("disagree"));
    }
}
