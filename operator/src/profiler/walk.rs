//! The walk of the whole keyspace: every key's name and type from `SCAN ... TYPE t` (one walk
//! per type, names only, no command per key), then every key's size with one O(1) command
//! (`STRLEN`, `HLEN`, `LLEN`, `SCARD`, `ZCARD`, `XLEN`), as `redis-cli --bigkeys` finds its
//! big keys. From it the profile's key counts per group are exact and the keys that hold a
//! large share of the elements are found; only the lengths of elements are left to sample.
//! A server whose SCAN has no TYPE option is walked with plain SCAN and one `TYPE` per key.

use std::collections::{BTreeMap, HashSet};
use std::hash::{BuildHasher, RandomState};

use redis::cmd;

use crate::profile::model::KeyType;

use super::error::ProfileError;
use super::key_sample::Session;

/// How much `SCAN` asks for per call.
pub const SCAN_COUNT: u64 = 100;

/// The types membench profiles, in the order they are walked.
pub const TYPES: [KeyType; 6] = [
    KeyType::String,
    KeyType::Hash,
    KeyType::List,
    KeyType::Set,
    KeyType::Zset,
    KeyType::Stream,
];

/// One key the walk found.
#[derive(Clone, Debug)]
pub struct WalkedKey {
    pub name: Vec<u8>,
    pub key_type: KeyType,
    /// Its size: a string's length in bytes, else its elements; None until sized, or when it
    /// went away (or changed type) before it was.
    pub size: Option<u64>,
}

/// Why a phase ended before its end: a bound (time, a signal), or a failure of the server.
pub enum Interruption {
    Bound(String),
    Failed(ProfileError),
}

/// What the walk found.
#[derive(Default)]
pub struct Walk {
    pub keys: Vec<WalkedKey>,
    pub other_types: BTreeMap<String, u64>,
    /// Whether the server's SCAN took TYPE (else one TYPE per key was sent).
    pub typed: bool,
}

/// The size command of a type.
pub fn size_command(key_type: KeyType) -> &'static str {
    match key_type {
        KeyType::String => "STRLEN",
        KeyType::Hash => "HLEN",
        KeyType::List => "LLEN",
        KeyType::Set => "SCARD",
        KeyType::Zset => "ZCARD",
        KeyType::Stream => "XLEN",
    }
}

/// Walks the keyspace's names and types. `stop` is asked before every command and says why
/// to end; what was walked until then is kept in `walk`.
pub fn walk_names(
    session: &mut Session<'_>,
    walk: &mut Walk,
    stop: &mut dyn FnMut(u64) -> Option<String>,
) -> Result<(), Interruption> {
    // SCAN may return a key twice while the server rehashes: seen keys by hash.
    let hasher = RandomState::new();
    let mut seen = HashSet::new();
    walk.typed = true;
    for (t, key_type) in TYPES.into_iter().enumerate() {
        let mut cursor = "0".to_string();
        loop {
            if let Some(why) = stop(walk.keys.len() as u64) {
                return Err(Interruption::Bound(why));
            }
            let reply: Result<(String, Vec<Vec<u8>>), ProfileError> = session.required(
                "SCAN",
                cmd("SCAN")
                    .arg(&cursor)
                    .arg("COUNT")
                    .arg(SCAN_COUNT)
                    .arg("TYPE")
                    .arg(key_type.as_str()),
            );
            let (next, batch) = match reply {
                Ok(reply) => reply,
                // The first typed SCAN refused for its syntax (a server before TYPE): walk
                // without it.
                Err(ProfileError::Unexpected { .. }) if t == 0 && cursor == "0" => {
                    walk.typed = false;
                    return walk_untyped(session, walk, stop);
                }
                Err(e) => return Err(Interruption::Failed(e)),
            };
            for name in batch {
                if seen.insert(hasher.hash_one(&name)) {
                    walk.keys.push(WalkedKey {
                        name,
                        key_type,
                        size: None,
                    });
                }
            }
            cursor = next;
            if cursor == "0" {
                break;
            }
        }
    }
    Ok(())
}

/// The walk of a server whose SCAN has no TYPE: plain SCAN, and TYPE per key.
fn walk_untyped(
    session: &mut Session<'_>,
    walk: &mut Walk,
    stop: &mut dyn FnMut(u64) -> Option<String>,
) -> Result<(), Interruption> {
    let hasher = RandomState::new();
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        if let Some(why) = stop(walk.keys.len() as u64) {
            return Err(Interruption::Bound(why));
        }
        let (next, batch): (String, Vec<Vec<u8>>) = session
            .required(
                "SCAN",
                cmd("SCAN").arg(&cursor).arg("COUNT").arg(SCAN_COUNT),
            )
            .map_err(Interruption::Failed)?;
        for name in batch {
            if !seen.insert(hasher.hash_one(&name)) {
                continue;
            }
            if let Some(why) = stop(walk.keys.len() as u64) {
                return Err(Interruption::Bound(why));
            }
            let reply: String = session
                .required("TYPE", cmd("TYPE").arg(&name))
                .map_err(Interruption::Failed)?;
            match KeyType::from_type_reply(&reply) {
                Some(key_type) => walk.keys.push(WalkedKey {
                    name,
                    key_type,
                    size: None,
                }),
                None if reply == "none" => {}
                None => *walk.other_types.entry(reply).or_default() += 1,
            }
        }
        cursor = next;
        if cursor == "0" {
            return Ok(());
        }
    }
}

/// Reads every walked key's size, one O(1) command per key; `sized` counts the keys done, so
/// an interrupted pass can be told from a finished one.
pub fn size_keys(
    session: &mut Session<'_>,
    keys: &mut [WalkedKey],
    sized: &mut u64,
    stop: &mut dyn FnMut(u64) -> Option<String>,
) -> Result<(), Interruption> {
    for key in keys.iter_mut() {
        if let Some(why) = stop(*sized) {
            return Err(Interruption::Bound(why));
        }
        let name = size_command(key.key_type);
        let reply: Result<u64, ProfileError> = session.required(name, cmd(name).arg(&key.name));
        key.size = match reply {
            // 0 is a key that went away (an existing key has at least one element).
            Ok(0) if key.key_type != KeyType::String => None,
            Ok(size) => Some(size),
            // The key was replaced by one of another type since the walk.
            Err(ProfileError::Unexpected { detail, .. }) if detail.contains("WRONGTYPE") => None,
            Err(e) => return Err(Interruption::Failed(e)),
        };
        *sized += 1;
    }
    Ok(())
}
