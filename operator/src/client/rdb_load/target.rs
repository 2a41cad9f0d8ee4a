//! What the engine under test can restore of a file beyond its keys' elements: hash fields'
//! own expiries (HPEXPIREAT), a stream's counters (XSETID's ENTRIESADDED and
//! MAXDELETEDID) and its consumer groups' entries read (XGROUP CREATE's ENTRIESREAD). Measured from the engine itself with `COMMAND INFO`, never decided by its
//! name or version: a build may lack what its version number suggests.

use serde::{Deserialize, Serialize};

use crate::client::engine::ControlConnection;

/// The engine's commands a load can use to restore more than the elements.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct RdbTarget {
    /// HPEXPIREAT exists (Redis 7.4+, Valkey 9+; not Valkey 8 nor Dragonfly 1.40), so hash
    /// fields keep their own expiry.
    pub field_expiry: bool,
    /// XSETID takes options (its arity is variable: Redis 7+, Valkey 7.2+; Dragonfly 1.40's
    /// is fixed at 3), so a stream's entries-added and largest deleted id are restored.
    pub stream_counters: bool,
    /// XGROUP CREATE is a subcommand with a variable arity in `COMMAND INFO` (`xgroup|create`
    /// -5 on Redis 7.0.15 and 8.6.3, Valkey 7.2.13 and 9.1.2; Redis 7.0 added ENTRIESREAD and
    /// the subcommand table together), so a consumer group's entries-read, and with it its
    /// lag, is restored. Redis 6.2.14 and Dragonfly 1.40 answer nothing for `xgroup|create`.
    /// Dragonfly 1.40 accepts the option and ignores it: after `XGROUP CREATE s g 2-0
    /// ENTRIESREAD 2`, XINFO GROUPS shows its entries-read and lag as nil, and it accepts
    /// `ENTRIESREAD` with no count too. So an accepted command is no proof, and it counts as
    /// not restored.
    #[serde(default)]
    pub group_entries_read: bool,
}

impl RdbTarget {
    /// Asks the engine on `control`. A command it does not know, or an answer that cannot
    /// be read, counts as not supported: the load then says what it left out.
    pub fn measure(control: &mut ControlConnection) -> Self {
        Self {
            field_expiry: command_arity(control, "hpexpireat").is_some(),
            stream_counters: command_arity(control, "xsetid").is_some_and(|arity| arity < 0),
            group_entries_read: command_arity(control, "xgroup|create")
                .is_some_and(|arity| arity < 0),
        }
    }
}

/// The arity `COMMAND INFO name` answers (negative for "at least"), None for a command the
/// engine does not have (its reply is one nil).
fn command_arity(control: &mut ControlConnection, name: &str) -> Option<i64> {
    let reply: redis::Value = control
        .query_unclassified(redis::cmd("COMMAND").arg("INFO").arg(name))
        .ok()?;
    arity_of(&reply)
}

/// The arity in a `COMMAND INFO` reply of one command.
pub fn arity_of(reply: &redis::Value) -> Option<i64> {
    let redis::Value::Array(commands) = reply else {
        return None;
    };
    match commands.first()? {
        redis::Value::Array(fields) => match fields.get(1)? {
            redis::Value::Int(arity) => Some(*arity),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn a_command_the_engine_lacks_has_no_arity() {
        assert_eq!(arity_of(&Value::Array(vec![Value::Nil])), None);
    }

    #[test]
    fn the_arity_is_the_second_field_of_the_command_s_entry() {
        let entry = Value::Array(vec![
            Value::BulkString(b"xsetid".to_vec()),
            Value::Int(-3),
            Value::Array(vec![]),
        ]);
        assert_eq!(arity_of(&Value::Array(vec![entry])), Some(-3));
    }
}
