//! Reading one key's shape with bounded commands: its type, TTL, encoding, size, and the
//! lengths of a bounded number of its elements ([`elements_per_key`]: 16 in a large keyspace,
//! up to 1024 in a small one). Only lengths and integer-ness are
//! kept, and a hash's field names: the values read go no further than this function, the
//! field names no further than the group's tally (`groups`), which keeps a name only when at
//! least five keys have it (an object's fields), as a key-name template keeps a literal part. Every command passes
//! the rate limit, and a command the server refuses or does not know is left out once, with a
//! note, when the profile can go without it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use redis::{Cmd, FromRedisValue, RedisError, cmd};

use crate::client::connection::engine::{ControlConnection, is_unknown_command};
use crate::profile::model::KeyType;

use super::error::ProfileError;

/// How many elements of one key are read at least, and at most.
pub const ELEMENTS_PER_KEY: usize = 16;
pub const MOST_ELEMENTS_PER_KEY: usize = 1024;
/// The elements a whole profile reads, about: a keyspace of few keys has each read more
/// deeply (one sorted set of millions is one key), still in one bounded command per key.
const ELEMENT_BUDGET: u64 = 200_000;

/// How many elements of each key a profile of `keys` keys reads.
pub fn elements_per_key(keys: u64) -> usize {
    (ELEMENT_BUDGET / keys.max(1)).clamp(ELEMENTS_PER_KEY as u64, MOST_ELEMENTS_PER_KEY as u64)
        as usize
}
/// How many entries of a stream are read.
pub const STREAM_ENTRIES: usize = 4;
/// A string is read (GET) only when it is short enough to be an integer.
const LONGEST_INTEGER: u64 = 20;

/// One element's length and whether it is an integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Element {
    pub length: u32,
    pub integer: bool,
    pub negative: bool,
}

impl Element {
    pub fn of(bytes: &[u8]) -> Self {
        Self {
            length: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
            integer: is_integer(bytes),
            negative: bytes.first() == Some(&b'-') && is_integer(bytes),
        }
    }
}

/// Whether the server would store these bytes as a number (the RDB reader's rule, so a live
/// profile and a file's agree).
pub use crate::rdb::holds_integer as is_integer;

/// What was read of one key.
#[derive(Clone, Debug, Default)]
pub struct KeyObservation {
    pub key_type: Option<KeyType>,
    pub key_length: u64,
    pub ttl_millis: Option<u64>,
    pub encoding: Option<String>,
    pub elements: Option<u64>,
    pub entry_fields: Vec<u64>,
    pub fields: Vec<Element>,
    pub values: Vec<Element>,
    pub scores: Vec<Element>,
    /// A hash's field names read, in the order of `fields` (left empty where the reader does
    /// not keep them).
    pub field_names: Vec<Vec<u8>>,
}

/// What reading a key found.
pub enum Sampled {
    Key(KeyObservation),
    /// The key expired or was deleted between SCAN and reading it.
    Vanished,
    /// A type membench does not profile (a module's type), by name.
    OtherType(String),
}

/// How a command failed.
enum Failure {
    /// The server's ACL refused it (NOPERM), or it does not know it.
    NotAllowed(String),
    /// Anything else: the server went away, or an unexpected error.
    Fatal(ProfileError),
}

/// Keeps the profiler's commands at or below a rate: command n waits until n / rate seconds
/// after the first.
pub struct RateLimiter {
    per_second: f64,
    started: Instant,
    sent: u64,
}

impl RateLimiter {
    pub fn new(per_second: u32) -> Self {
        Self {
            per_second: f64::from(per_second.max(1)),
            started: Instant::now(),
            sent: 0,
        }
    }

    pub fn wait(&mut self) {
        let due = Duration::from_secs_f64(self.sent as f64 / self.per_second);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
        self.sent += 1;
    }

    pub fn sent(&self) -> u64 {
        self.sent
    }
}

/// The connection, the rate limit, and what the server would not answer.
pub struct Session<'a> {
    control: &'a mut ControlConnection,
    pub limiter: RateLimiter,
    /// Commands left out, each with what the profile lacks without it.
    pub left_out: BTreeSet<String>,
    unavailable: BTreeSet<&'static str>,
}

impl<'a> Session<'a> {
    pub fn new(control: &'a mut ControlConnection, per_second: u32) -> Self {
        Self {
            control,
            limiter: RateLimiter::new(per_second),
            left_out: BTreeSet::new(),
            unavailable: BTreeSet::new(),
        }
    }

    fn run<T: FromRedisValue>(&mut self, name: &'static str, command: &Cmd) -> Result<T, Failure> {
        self.limiter.wait();
        self.control
            .query_unclassified(command)
            .map_err(|e| self.classify(name, e))
    }

    fn classify(&self, name: &'static str, e: RedisError) -> Failure {
        let text = e.to_string();
        if e.code() == Some("NOPERM") || text.contains("NOPERM") {
            return Failure::NotAllowed(format!("refused by the server's ACL: {text}"));
        }
        if is_unknown_command(&text) || text.to_ascii_lowercase().contains("unknown subcommand") {
            return Failure::NotAllowed(format!("unknown to this server: {text}"));
        }
        if e.is_io_error()
            || e.is_connection_dropped()
            || e.is_timeout()
            || e.is_unrecoverable_error()
        {
            return Failure::Fatal(ProfileError::ServerGone {
                address: self.control.address().to_string(),
                detail: text,
                sampled: 0,
            });
        }
        Failure::Fatal(ProfileError::Unexpected {
            command: name.to_string(),
            detail: text,
        })
    }

    /// A command the profile needs: refused, it ends the profile naming it.
    pub fn required<T: FromRedisValue>(
        &mut self,
        name: &'static str,
        command: &Cmd,
    ) -> Result<T, ProfileError> {
        self.run(name, command).map_err(|failure| match failure {
            Failure::NotAllowed(detail) => ProfileError::Refused {
                command: name.to_string(),
                detail,
            },
            Failure::Fatal(e) => e,
        })
    }

    /// A command the profile can go without: refused or unknown, it is left out from then on
    /// and `lacking` (what the profile then lacks) goes into its notes.
    pub fn optional<T: FromRedisValue>(
        &mut self,
        name: &'static str,
        command: &Cmd,
        lacking: &str,
    ) -> Result<Option<T>, ProfileError> {
        if self.unavailable.contains(name) {
            return Ok(None);
        }
        match self.run(name, command) {
            Ok(value) => Ok(Some(value)),
            Err(Failure::NotAllowed(detail)) => {
                self.unavailable.insert(name);
                self.left_out.insert(format!("{name} {detail}: {lacking}"));
                Ok(None)
            }
            Err(Failure::Fatal(e)) => Err(e),
        }
    }
}

fn elements_of(items: &[Vec<u8>]) -> Vec<Element> {
    items.iter().map(|item| Element::of(item)).collect()
}

/// Pairs `[a1, b1, a2, b2, ...]` as two lists of elements.
fn pairs_of(flat: &[Vec<u8>]) -> (Vec<Element>, Vec<Element>) {
    let firsts = flat.iter().step_by(2).map(|b| Element::of(b)).collect();
    let seconds = flat
        .iter()
        .skip(1)
        .step_by(2)
        .map(|b| Element::of(b))
        .collect();
    (firsts, seconds)
}

/// Reads one key, with at most `n` of its elements.
pub fn sample_key(
    session: &mut Session<'_>,
    key: &[u8],
    n: usize,
) -> Result<Sampled, ProfileError> {
    let type_reply: String = session.required("TYPE", cmd("TYPE").arg(key))?;
    if type_reply == "none" {
        return Ok(Sampled::Vanished);
    }
    let Some(key_type) = KeyType::from_type_reply(&type_reply) else {
        return Ok(Sampled::OtherType(type_reply));
    };
    let pttl: i64 = session.required("PTTL", cmd("PTTL").arg(key))?;
    if pttl == -2 {
        return Ok(Sampled::Vanished);
    }
    let mut key_sample = KeyObservation {
        key_type: Some(key_type),
        key_length: key.len() as u64,
        ttl_millis: u64::try_from(pttl).ok(),
        ..KeyObservation::default()
    };
    key_sample.encoding = session.optional(
        "OBJECT",
        cmd("OBJECT").arg("ENCODING").arg(key),
        "encodings are left out",
    )?;
    match key_type {
        KeyType::String => {
            let length: u64 = session.required("STRLEN", cmd("STRLEN").arg(key))?;
            let integer = if length <= LONGEST_INTEGER {
                let value: Option<Vec<u8>> = session.optional(
                    "GET",
                    cmd("GET").arg(key),
                    "which strings are integers is not known: all are taken as text",
                )?;
                // Some(whether it is negative) for an integer.
                value
                    .filter(|v| is_integer(v))
                    .map(|v| v.first() == Some(&b'-'))
            } else {
                None
            };
            key_sample.values = vec![Element {
                length: u32::try_from(length).unwrap_or(u32::MAX),
                integer: integer.is_some(),
                negative: integer.is_some_and(|negative| negative),
            }];
        }
        KeyType::Hash => {
            key_sample.elements = Some(session.required("HLEN", cmd("HLEN").arg(key))?);
            let mut flat: Option<Vec<Vec<u8>>> = session.optional(
                "HRANDFIELD",
                cmd("HRANDFIELD").arg(key).arg(n).arg("WITHVALUES"),
                "hash fields are read with HSCAN instead",
            )?;
            if flat.is_none() {
                let scanned: Option<(String, Vec<Vec<u8>>)> = session.optional(
                    "HSCAN",
                    cmd("HSCAN").arg(key).arg(0).arg("COUNT").arg(n),
                    "the sizes of hash fields and values are not known",
                )?;
                flat = scanned.map(|(_, mut items)| {
                    items.truncate(2 * n);
                    items
                });
            }
            let flat = flat.unwrap_or_default();
            let (fields, values) = pairs_of(&flat);
            key_sample.fields = fields;
            key_sample.values = values;
            key_sample.field_names = flat.into_iter().step_by(2).collect();
        }
        KeyType::List => {
            key_sample.elements = Some(session.required("LLEN", cmd("LLEN").arg(key))?);
            let items: Option<Vec<Vec<u8>>> = session.optional(
                "LRANGE",
                cmd("LRANGE").arg(key).arg(0).arg(n - 1),
                "the sizes of list items are not known",
            )?;
            key_sample.values = elements_of(&items.unwrap_or_default());
        }
        KeyType::Set => {
            key_sample.elements = Some(session.required("SCARD", cmd("SCARD").arg(key))?);
            let members: Option<Vec<Vec<u8>>> = session.optional(
                "SRANDMEMBER",
                cmd("SRANDMEMBER").arg(key).arg(n),
                "the sizes of set members are not known",
            )?;
            key_sample.values = elements_of(&members.unwrap_or_default());
        }
        KeyType::Zset => {
            key_sample.elements = Some(session.required("ZCARD", cmd("ZCARD").arg(key))?);
            let mut flat: Option<Vec<Vec<u8>>> = session.optional(
                "ZRANDMEMBER",
                cmd("ZRANDMEMBER").arg(key).arg(n).arg("WITHSCORES"),
                "sorted-set members are read with ZRANGE of the first ones instead",
            )?;
            if flat.is_none() {
                flat = session.optional(
                    "ZRANGE",
                    cmd("ZRANGE").arg(key).arg(0).arg(n - 1).arg("WITHSCORES"),
                    "the sizes of sorted-set members and scores are not known",
                )?;
            }
            let (members, scores) = pairs_of(&flat.unwrap_or_default());
            key_sample.values = members;
            key_sample.scores = scores;
        }
        KeyType::Stream => {
            key_sample.elements = Some(session.required("XLEN", cmd("XLEN").arg(key))?);
            let entries: Option<Vec<(String, Vec<Vec<u8>>)>> = session.optional(
                "XRANGE",
                cmd("XRANGE")
                    .arg(key)
                    .arg("-")
                    .arg("+")
                    .arg("COUNT")
                    .arg(STREAM_ENTRIES),
                "the sizes of stream entries are not known",
            )?;
            for (_, flat) in entries.unwrap_or_default() {
                key_sample.entry_fields.push(flat.len() as u64 / 2);
                let (fields, values) = pairs_of(&flat);
                key_sample.fields.extend(fields);
                key_sample.values.extend(values);
            }
        }
    }
    Ok(Sampled::Key(key_sample))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_what_the_server_stores_as_numbers() {
        for yes in [
            "0",
            "7",
            "-12",
            "9223372036854775807",
            "-9223372036854775808",
        ] {
            assert!(is_integer(yes.as_bytes()), "{yes}");
        }
        for no in [
            "",
            "-",
            "007",
            "-0",
            "1.5",
            "12a",
            "9223372036854775808",
            " 1",
            "+1",
        ] {
            assert!(!is_integer(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn the_rate_limit_spaces_commands() {
        let mut limiter = RateLimiter::new(200);
        let started = Instant::now();
        for _ in 0..21 {
            limiter.wait();
        }
        // 21 commands at 200/s: the 21st is due 100 ms after the first.
        assert!(
            started.elapsed() >= Duration::from_millis(99),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(limiter.sent(), 21);
    }
}
