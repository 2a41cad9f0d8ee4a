//! A churn as the user asked for it (`spec.churn`, `membench load --churn-rounds ...`), checked:
//! its rounds, shares and sizes, and the workloads it applies to.

use serde::{Deserialize, Serialize};

use super::rounds::Shares;
use crate::client::workloads::workload::Workload;
use crate::crd::{ChurnSpec, RecordLayout};
use crate::error::BenchError;

/// The most items (a hash record's fields, a random-strings key space) a churn follows: one
/// byte each on the client.
pub const MAX_CHURN_ITEMS: u64 = 100_000_000;

/// A churn as asked, checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Churn {
    pub rounds: u32,
    pub delete_share: Option<f64>,
    pub overwrite_share: Option<f64>,
    pub overwrite_value_size: u32,
    pub defrag: bool,
    pub defrag_seconds: u32,
    pub seed: u64,
}

impl Churn {
    /// The checks a churn passes whichever way it was given: `field` names a setting
    /// (`deleteShare`) as the user gave it (`spec.churn.deleteShare`, `--delete-share`).
    pub fn checked(spec: &ChurnSpec, field: &dyn Fn(&str) -> String) -> Result<Self, BenchError> {
        let invalid = |name: &str, message: String| BenchError::InvalidArgument {
            field: field(name),
            message,
        };
        if spec.rounds == 0 || spec.rounds > 100 {
            return Err(invalid(
                "rounds",
                format!("is {}: it must be between 1 and 100", spec.rounds),
            ));
        }
        if spec.delete_share.is_none() && spec.overwrite_share.is_none() {
            return Err(invalid(
                "deleteShare",
                "a churn needs deleteShare, overwriteShare or both: a round that changes nothing measures nothing".into(),
            ));
        }
        if let Some(share) = spec.delete_share {
            if share >= 1.0 && share.is_finite() {
                return Err(invalid(
                    "deleteShare",
                    format!(
                        "is {share}: a round would delete every item, leaving nothing to measure; it must be above 0 and below 1"
                    ),
                ));
            }
            if !(share > 0.0 && share < 1.0) {
                return Err(invalid(
                    "deleteShare",
                    format!("is {share}: it must be above 0 and below 1"),
                ));
            }
        }
        if let Some(share) = spec.overwrite_share
            && !(share > 0.0 && share <= 1.0)
        {
            return Err(invalid(
                "overwriteShare",
                format!("is {share}: it must be above 0 and at most 1"),
            ));
        }
        let overwrite_value_size = match (spec.overwrite_share, spec.overwrite_value_size) {
            (Some(_), None) => {
                return Err(invalid(
                    "overwriteValueSize",
                    "is needed with overwriteShare: the size in bytes of the values an overwrite writes".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "overwriteValueSize",
                    "applies only with overwriteShare: set overwriteShare too, or remove overwriteValueSize".into(),
                ));
            }
            (_, Some(size)) if size == 0 || size > 1 << 20 => {
                return Err(invalid(
                    "overwriteValueSize",
                    format!("is {size}: it must be between 1 and 1048576 bytes"),
                ));
            }
            (_, size) => size.unwrap_or(0),
        };
        if spec.defrag_seconds < 5 || spec.defrag_seconds > 3600 {
            return Err(invalid(
                "defragSeconds",
                format!("is {}: it must be between 5 and 3600", spec.defrag_seconds),
            ));
        }
        Ok(Self {
            rounds: spec.rounds,
            delete_share: spec.delete_share,
            overwrite_share: spec.overwrite_share,
            overwrite_value_size,
            defrag: spec.defrag,
            defrag_seconds: spec.defrag_seconds,
            seed: spec.seed,
        })
    }

    /// A spec's churn (`spec.churn`), checked.
    pub fn from_spec(spec: &ChurnSpec) -> Result<Self, BenchError> {
        Self::checked(spec, &|name| format!("spec.churn.{name}"))
    }

    /// What a round draws by.
    pub fn shares(&self) -> Shares {
        Shares {
            seed: self.seed,
            delete: self.delete_share,
            overwrite: self.overwrite_share,
            value_size: self.overwrite_value_size,
        }
    }

    /// Whether the churn applies to `workload`: one whose items it can name (a random-strings
    /// load's keys are named by replaying its draws, a profile's rebuild's by its own), with no
    /// TTL (`ttlSeconds`; a rebuilt key's TTL from its profile is given again on overwrite) (an overwrite would drop the
    /// TTL and a key that expires mid-round would be counted as lost), of at most
    /// [`MAX_CHURN_ITEMS`] things to follow (items; a hash record's fields; a random-strings
    /// key space). `field` names the churn as the user gave it.
    pub fn check_workload(
        &self,
        workload: &Workload,
        has_ttl: bool,
        field: &str,
    ) -> Result<(), BenchError> {
        let refuse = |message: String| {
            Err(BenchError::InvalidArgument {
                field: field.to_string(),
                message,
            })
        };
        let (followed, what) = match workload {
            Workload::Strings { keys, .. } => (*keys, "keys"),
            Workload::Records {
                records,
                layout: RecordLayout::Hash,
                fields,
            } => (
                records.saturating_mul(fields.len() as u64),
                "fields (records x fields: a record stored as a hash churns on its fields)",
            ),
            Workload::Records { records, .. } => (*records, "records"),
            Workload::SortedSet { members, .. } => (*members, "members"),
            Workload::RandomStrings { keyspace, .. } => (
                *keyspace,
                "keys of key space (the client replays the load's draws over the whole key space to know which keys exist)",
            ),
            Workload::Profile(profile) => (profile.keys, "keys"),
            Workload::Rdb(_) => {
                return refuse("does not apply to the rdb workload: the file's keys have no items a round can draw from; load the file without churn, or churn a profile of it (`membench profile --rdb FILE`)".into());
            }
        };
        if has_ttl {
            return refuse("does not apply with a TTL (ttlSeconds): an overwrite drops a key's TTL, and keys that expire during a round would be counted as deleted; remove ttlSeconds or the churn".into());
        }
        if followed > MAX_CHURN_ITEMS {
            return refuse(format!(
                "follows at most {MAX_CHURN_ITEMS} items, fields or keys (the client keeps a byte for each); this workload has {followed} {what}: make it smaller"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(delete: Option<f64>, overwrite: Option<f64>, size: Option<u32>) -> ChurnSpec {
        ChurnSpec {
            rounds: 2,
            delete_share: delete,
            overwrite_share: overwrite,
            overwrite_value_size: size,
            defrag: false,
            defrag_seconds: 60,
            seed: 1,
        }
    }

    fn refusal(spec: &ChurnSpec) -> String {
        Churn::from_spec(spec).unwrap_err().to_string()
    }

    #[test]
    fn shares_outside_their_range_and_a_round_that_deletes_everything_are_refused_naming_the_field()
    {
        assert!(refusal(&spec(Some(1.0), None, None)).contains("would delete every item"));
        assert!(refusal(&spec(Some(0.0), None, None)).contains("spec.churn.deleteShare"));
        assert!(refusal(&spec(Some(-0.5), None, None)).contains("above 0 and below 1"));
        assert!(refusal(&spec(Some(f64::NAN), None, None)).contains("above 0 and below 1"));
        assert!(refusal(&spec(None, Some(1.5), Some(10))).contains("spec.churn.overwriteShare"));
        assert!(refusal(&spec(None, Some(0.5), None)).contains("overwriteValueSize"));
        assert!(refusal(&spec(Some(0.5), None, Some(10))).contains("applies only with"));
        assert!(refusal(&spec(None, None, None)).contains("changes nothing"));
        assert!(Churn::from_spec(&spec(Some(0.5), Some(1.0), Some(300))).is_ok());
    }

    #[test]
    fn a_ttl_and_too_many_things_to_follow_are_refused_saying_what_to_do_and_a_rebuild_is_not() {
        let churn = Churn::from_spec(&spec(Some(0.5), None, None)).unwrap();
        let check = |workload: &Workload, ttl: bool| {
            churn
                .check_workload(workload, ttl, "spec.churn")
                .map_err(|e| e.to_string())
        };
        let random = |keyspace| Workload::RandomStrings {
            requests: 10,
            keyspace,
            value_size: 16,
            seed: 1,
        };
        assert!(check(&random(10), false).is_ok());
        let message = check(&random(MAX_CHURN_ITEMS + 1), false).unwrap_err();
        assert!(message.contains("keys of key space"), "{message}");
        let strings = Workload::Strings {
            keys: 10,
            value_size: 100,
        };
        assert!(check(&strings, false).is_ok());
        assert!(check(&strings, true).unwrap_err().contains("TTL"));
        // A hash record's fields are what is followed: records x fields.
        let hashes = |records| Workload::Records {
            records,
            layout: RecordLayout::Hash,
            fields: vec!["a".into(), "b".into(), "c".into(), "d".into()],
        };
        assert!(check(&hashes(MAX_CHURN_ITEMS / 4), false).is_ok());
        let message = check(&hashes(MAX_CHURN_ITEMS / 4 + 1), false).unwrap_err();
        assert!(message.contains("fields (records x fields"), "{message}");
        // A profile's rebuild follows its keys; its own TTLs are no `ttlSeconds`.
        let profile = crate::profile::Profile::parse(
            "format: 1\nsource: {keys: 10}\ngroups:\n- template: \"s:{n}\"\n  type: string\n  share: 1\n  keyLength: {buckets: [[5, 5, 1]]}\n  ttl: {share: 0.5, millis: {buckets: [[1000, 1000, 1]]}}\n  values: {textLength: {buckets: [[4, 4, 1]]}}\n",
        )
        .unwrap();
        let rebuild =
            crate::client::workloads::profile_workload::ProfileWorkload::new(profile, 1.0, 1.0, 1);
        let rebuild = Workload::Profile(rebuild.unwrap());
        assert!(check(&rebuild, false).is_ok());
        assert!(check(&rebuild, true).unwrap_err().contains("TTL"));
    }
}
