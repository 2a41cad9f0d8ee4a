//! What the engine under test can restore of a file beyond its keys' elements: hash fields'
//! own expiries (HPEXPIREAT), a stream's counters (XSETID's ENTRIESADDED and
//! MAXDELETEDID) and its consumer groups' entries read (XGROUP SETID's ENTRIESREAD). Measured from the engine itself with `COMMAND INFO`, never decided by its
//! name or version: a build may lack what its version number suggests.

use serde::{Deserialize, Serialize};

use crate::client::connection::engine::ControlConnection;
use crate::client::connection::resp::named_entries;

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
    /// A consumer group's entries-read, and with it its lag, is restored with `XGROUP SETID
    /// ... ENTRIESREAD` (Redis 7.0 added the option to XGROUP CREATE and SETID together). Either
    /// `COMMAND INFO` gives `xgroup|setid` a variable arity (-5 on Redis 7.0.15 and 8.6.3,
    /// Valkey 7.2.13 and 9.1.2), or, where it answers nothing for the subcommand (Redis 6.2.14,
    /// Dragonfly 1.40), a probe on a scratch stream reads the count back with XINFO GROUPS.
    /// Dragonfly 1.40 takes SETID's ENTRIESREAD but accepts CREATE's and ignores it (XINFO
    /// GROUPS shows entries-read and lag nil after `XGROUP CREATE s g 2-0 ENTRIESREAD 2`), so
    /// an accepted command is no proof: only the count read back is.
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
            group_entries_read: command_arity(control, "xgroup|setid")
                .is_some_and(|arity| arity < 0)
                || entries_read_read_back(control),
        }
    }
}

/// The scratch stream of the entries-read probe: deleted before and after.
const PROBE_KEY: &str = "membench:probe:entries-read";

/// Whether `XGROUP SETID ... ENTRIESREAD 1` on a scratch stream of two entries reads back as
/// entries-read 1 in XINFO GROUPS. Runs before the first repetition, which empties the engine;
/// any refusal (an unknown option, a cluster node that does not own the key's slot) is a no.
fn entries_read_read_back(control: &mut ControlConnection) -> bool {
    let mut probe = || -> redis::RedisResult<bool> {
        control.query_unclassified::<()>(redis::cmd("DEL").arg(PROBE_KEY))?;
        for id in ["1-1", "2-1"] {
            control.query_unclassified::<()>(
                redis::cmd("XADD").arg(PROBE_KEY).arg(id).arg("f").arg("v"),
            )?;
        }
        control.query_unclassified::<()>(
            redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(PROBE_KEY)
                .arg("g")
                .arg("1-1"),
        )?;
        control.query_unclassified::<()>(
            redis::cmd("XGROUP")
                .arg("SETID")
                .arg(PROBE_KEY)
                .arg("g")
                .arg("1-1")
                .arg("ENTRIESREAD")
                .arg(1),
        )?;
        let groups: redis::Value =
            control.query_unclassified(redis::cmd("XINFO").arg("GROUPS").arg(PROBE_KEY))?;
        Ok(entries_read_of_first_group(&groups) == Some(1))
    };
    let restored = probe().unwrap_or(false);
    let _ = control.query_unclassified::<()>(redis::cmd("DEL").arg(PROBE_KEY));
    restored
}

/// The `entries-read` of the first group in an XINFO GROUPS reply (RESP2 pairs or RESP3 map).
fn entries_read_of_first_group(reply: &redis::Value) -> Option<i64> {
    let redis::Value::Array(groups) = reply else {
        return None;
    };
    named_entries(groups.first()?)
        .into_iter()
        .find_map(|(name, value)| match value {
            redis::Value::Int(count) if name == "entries-read" => Some(count),
            _ => None,
        })
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
    fn entries_read_is_read_from_the_first_group_in_either_protocol() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let resp2 = Value::Array(vec![Value::Array(vec![
            bulk("name"),
            bulk("g"),
            bulk("entries-read"),
            Value::Int(1),
        ])]);
        assert_eq!(entries_read_of_first_group(&resp2), Some(1));
        let resp3 = Value::Array(vec![Value::Map(vec![(
            bulk("entries-read"),
            Value::Int(4),
        )])]);
        assert_eq!(entries_read_of_first_group(&resp3), Some(4));
        // nil (Dragonfly after CREATE's ignored ENTRIESREAD) and no group are no count.
        let nil = Value::Array(vec![Value::Array(vec![bulk("entries-read"), Value::Nil])]);
        assert_eq!(entries_read_of_first_group(&nil), None);
        assert_eq!(entries_read_of_first_group(&Value::Array(vec![])), None);
    }

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
