//! Keys with a TTL: which items of a workload get one (`ttlShare` of them, spread evenly and
//! decided by the item's number, so a random key drawn twice gets the same answer both times),
//! and how many keys with an expiry the engine must then hold (`INFO keyspace` `expires=`).

use serde::{Deserialize, Serialize};

use crate::crd::WorkloadSpec;
use crate::error::BenchError;

/// The share is applied in millionths: exact integer arithmetic, so the count of items with a
/// TTL is known exactly before the load.
const SHARE_UNITS: u128 = 1_000_000;

/// The longest TTL a spec may ask for: ten years.
pub const MAX_TTL_SECONDS: u32 = 315_360_000;

/// The least time a TTL must leave for the load and its readings, on top of `settleSeconds`.
pub const MIN_TTL_MARGIN_SECONDS: u32 = 60;

/// A TTL set with each write: `SET ... EX seconds`, or `EXPIRE key seconds` after `HSET` and
/// after the sorted set's first `ZADD`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ttl {
    pub seconds: u32,
    /// The share of items that get one, from 0 (exclusive) to 1.
    pub share: f64,
}

impl Ttl {
    fn units(&self) -> u128 {
        (self.share * SHARE_UNITS as f64).round() as u128
    }

    /// Whether item number `item` (a key's number, a record's, the sorted set's 0) gets a TTL:
    /// every item whose step crosses a whole number of `1 / share`, so that `share` of any
    /// run of items get one.
    pub fn applies_to(&self, item: u64) -> bool {
        let units = self.units();
        let item = u128::from(item);
        (item + 1) * units / SHARE_UNITS > item * units / SHARE_UNITS
    }

    /// How many of the items `0..items` get a TTL.
    pub fn items_with_ttl(&self, items: u64) -> u64 {
        (u128::from(items) * self.units() / SHARE_UNITS) as u64
    }

    /// The TTL of a spec's workload, checked: `ttlShare` only with `ttlSeconds`, a share above
    /// 0 and at most 1 (the sorted set, one key, takes only 1), and a TTL that outlives the
    /// load and its readings by at least [`MIN_TTL_MARGIN_SECONDS`] after `settle_seconds`.
    pub fn from_spec(spec: &WorkloadSpec, settle_seconds: u32) -> Result<Option<Ttl>, BenchError> {
        let (kind, ttl) = if let Some(w) = &spec.sorted_set {
            ("sortedSet", &w.ttl)
        } else if let Some(w) = &spec.random_strings {
            ("randomStrings", &w.ttl)
        } else if let Some(w) = &spec.strings {
            ("strings", &w.ttl)
        } else if let Some(w) = &spec.records {
            ("records", &w.ttl)
        } else {
            return Ok(None);
        };
        let field = |name: &str| format!("spec.workload.{kind}.{name}");
        Self::checked(
            ttl.ttl_seconds,
            ttl.ttl_share,
            settle_seconds,
            kind == "sortedSet",
            &field,
        )
    }

    /// The same checks for a TTL given any way (a spec, `membench load`'s flags): `field`
    /// names a setting (`ttlSeconds`, `ttlShare`) as the user gave it.
    pub fn checked(
        seconds: Option<u32>,
        share: Option<f64>,
        settle_seconds: u32,
        one_key: bool,
        field: &dyn Fn(&str) -> String,
    ) -> Result<Option<Ttl>, BenchError> {
        let invalid = |name: &str, message: String| BenchError::InvalidArgument {
            field: field(name),
            message,
        };
        let Some(seconds) = seconds else {
            return match share {
                Some(_) => Err(invalid(
                    "ttlShare",
                    "applies only with ttlSeconds: set ttlSeconds too, or remove ttlShare".into(),
                )),
                None => Ok(None),
            };
        };
        let share = share.unwrap_or(1.0);
        if !(share > 0.0 && share <= 1.0) {
            return Err(invalid(
                "ttlShare",
                format!("is {share}: it must be above 0 and at most 1 (1 gives every item a TTL)"),
            ));
        }
        if one_key && share != 1.0 {
            return Err(invalid(
                "ttlShare",
                format!(
                    "is {share}: the sorted set is one key, which has a TTL or not; leave ttlShare out"
                ),
            ));
        }
        let least = settle_seconds.saturating_add(MIN_TTL_MARGIN_SECONDS);
        if seconds < least || seconds > MAX_TTL_SECONDS {
            return Err(invalid(
                "ttlSeconds",
                format!(
                    "is {seconds}: keys must not expire before the final reading, which comes after the load and settleSeconds ({settle_seconds}); it must be between {least} and {MAX_TTL_SECONDS} (a repetition whose load and readings outlast the TTL fails as TtlTooShort)"
                ),
            ));
        }
        Ok(Some(Ttl { seconds, share }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_of_items_spread_evenly_get_a_ttl_and_their_count_is_exact() {
        let half = Ttl {
            seconds: 3600,
            share: 0.5,
        };
        let with: Vec<u64> = (0..8).filter(|i| half.applies_to(*i)).collect();
        assert_eq!(with, [1, 3, 5, 7]);
        assert_eq!(half.items_with_ttl(8), 4);
        let third = Ttl {
            seconds: 3600,
            share: 0.3,
        };
        let counted = (0..1_000_000).filter(|i| third.applies_to(*i)).count() as u64;
        assert_eq!(counted, third.items_with_ttl(1_000_000));
        assert_eq!(counted, 300_000);
        let all = Ttl {
            seconds: 3600,
            share: 1.0,
        };
        assert!((0..1000).all(|i| all.applies_to(i)));
    }
}
