//! What the churn tests share: the test's own replay of the published draws, a result's rounds,
//! a JSON figure, and the engine's key count over the test's own connection.

use membench::client::connection::engine::EngineAddress;
use serde_json::Value;

/// A JSON figure as a number.
pub fn number(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

/// The keys the engine at `address` holds (DBSIZE), over a connection of the test's own.
pub fn dbsize(address: &EngineAddress) -> u64 {
    redis::cmd("DBSIZE")
        .query(&mut super::connect(address))
        .unwrap()
}

/// What the published draws say a churn of `items` things (a record's fields, numbered record
/// x fields + the field's place; a key space's keys) leaves after `rounds` rounds of seed 1:
/// `None` deleted, `Some(false)` as loaded, `Some(true)` overwritten; and each round's deletes
/// and overwrites. `held` says which existed before the first round.
pub fn replay(
    held: &[bool],
    rounds: u32,
    delete: f64,
    overwrite: f64,
) -> (Vec<Option<bool>>, Vec<(u64, u64)>) {
    use membench::client::phases::churn::{deletes, overwrites};
    let mut states: Vec<Option<bool>> = held.iter().map(|h| h.then_some(false)).collect();
    let mut counts = Vec::new();
    for round in 1..=rounds {
        let (mut deleted, mut overwritten) = (0, 0);
        for (item, state) in states.iter_mut().enumerate() {
            if state.is_none() {
                continue;
            }
            if deletes(1, round, item as u64, delete) {
                *state = None;
                deleted += 1;
            } else if overwrites(1, round, item as u64, overwrite) {
                *state = Some(true);
                overwritten += 1;
            }
        }
        counts.push((deleted, overwritten));
    }
    (states, counts)
}

/// The first repetition's churn rounds of a `membench load` JSON result.
pub fn rounds_of(json: &Value) -> Vec<Value> {
    json["repetitions"][0]["churn"]["rounds"]
        .as_array()
        .unwrap_or_else(|| panic!("no churn rounds: {json}"))
        .clone()
}
