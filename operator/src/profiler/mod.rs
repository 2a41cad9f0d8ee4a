//! `membench profile`'s reading of a live server: the keyspace walked with `SCAN` and a
//! bounded `COUNT` (never `KEYS`), each sampled key read by `key_sample`, the keys summed up
//! by template and type in `groups`, under a rate limit and a time bound. Read-only: it sends
//! no command that writes. What it produces is a [`Profile`] (`profile/`), which holds
//! lengths, counts and shares only. `cluster` profiles every primary of a cluster and merges
//! them (`--cluster`).

mod cluster;
mod error;
mod groups;
mod key_sample;

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, Instant};

use redis::cmd;

use crate::client::engine::{ControlConnection, identify, parse_info};
use crate::profile::model::{PROFILE_FORMAT, Profile, ProfileSource};
use crate::profile::templates::TemplateBuilder;

pub use cluster::profile_cluster;
pub use error::ProfileError;
pub use key_sample::{ELEMENTS_PER_KEY, MOST_ELEMENTS_PER_KEY, elements_per_key, is_integer};
use key_sample::{Sampled, Session, sample_key};

/// How much `SCAN` asks for per call.
pub const SCAN_COUNT: u64 = 100;
/// The default rate limit of the profiler's own commands.
pub const DEFAULT_COMMANDS_PER_SECOND: u32 = 5000;

/// How a profile is taken.
#[derive(Clone, Debug)]
pub struct ProfileOptions {
    pub db: u32,
    /// Sample at most this many keys.
    pub sample_keys: u64,
    pub max_commands_per_second: u32,
    /// End sampling after this long, keeping what was sampled.
    pub max_duration: Option<Duration>,
}

/// How far sampling has got, for a progress bar.
#[derive(Clone, Copy, Debug)]
pub struct ProfileProgress {
    pub sampled: u64,
    /// The keys that will be sampled: `--sample-keys` or DBSIZE, whichever is less.
    pub target: u64,
}

/// A profile, and what ended sampling early when it did not finish (the profile then holds
/// what was sampled, and says so).
pub struct ProfileOutcome {
    pub profile: Profile,
    pub error: Option<ProfileError>,
}

/// The databases other than `db` that INFO keyspace says hold keys, for the message of an
/// empty one.
fn other_databases(keyspace: &str, db: u32) -> String {
    let fields = parse_info(keyspace);
    let mut others: Vec<String> = fields
        .iter()
        .filter(|(name, _)| name.starts_with("db") && **name != format!("db{db}"))
        .filter_map(|(name, value)| {
            let keys = value.split(',').find_map(|f| f.strip_prefix("keys="))?;
            Some(format!("{name} holds {keys} keys (--db {})", &name[2..]))
        })
        .collect();
    others.sort();
    if others.is_empty() {
        String::new()
    } else {
        format!("; {}", others.join(", "))
    }
}

/// Reads the shape of database `options.db` of the server behind `control`.
pub fn profile_server(
    control: &mut ControlConnection,
    options: &ProfileOptions,
    progress: &mut dyn FnMut(ProfileProgress),
) -> Result<ProfileOutcome, ProfileError> {
    let started = Instant::now();
    let address = control.address().to_string();
    let mut session = Session::new(control, options.max_commands_per_second);
    let mut notes = Vec::new();
    let mut source = ProfileSource {
        db: options.db,
        ..ProfileSource::default()
    };

    let server: Option<String> = session.optional(
        "INFO",
        cmd("INFO").arg("server"),
        "the engine, its version, its memory and INFO KEYSIZES are not recorded",
    )?;
    if let Some(server) = &server {
        let fields = parse_info(server);
        let (engine, version) = identify(&fields);
        source.engine = Some(engine);
        source.version = Some(version);
        let mode = fields
            .get("redis_mode")
            .or_else(|| fields.get("server_mode"));
        if mode.is_some_and(|m| m == "cluster") {
            notes.push(format!(
                "the server is a cluster node: this profile holds the keys of {address} only (its own slots); --cluster profiles every primary into one profile"
            ));
        }
    }
    if options.db != 0 {
        let _: String = session.required("SELECT", cmd("SELECT").arg(options.db))?;
    }
    let dbsize: u64 = session.required("DBSIZE", &cmd("DBSIZE"))?;
    if dbsize == 0 {
        let keyspace: Option<String> = session.optional("INFO", cmd("INFO").arg("keyspace"), "")?;
        return Err(ProfileError::Empty {
            address,
            db: options.db,
            others: other_databases(&keyspace.unwrap_or_default(), options.db),
        });
    }
    source.keys = dbsize;
    if server.is_some() {
        let memory: Option<String> = session.optional(
            "INFO",
            cmd("INFO").arg("memory"),
            "the source's used_memory is not recorded",
        )?;
        source.used_memory = memory.and_then(|m| {
            parse_info(&m)
                .get("used_memory")
                .and_then(|v| v.parse().ok())
        });
        let keysizes: Option<String> = session.optional(
            "INFO",
            cmd("INFO").arg("keysizes"),
            "INFO KEYSIZES is not recorded",
        )?;
        if let Some(keysizes) = keysizes {
            source.keysizes = parse_info(&keysizes)
                .into_iter()
                .filter(|(name, _)| name.starts_with("db"))
                .collect();
            // An unknown INFO section is an empty reply, not an error.
            if source.keysizes.is_empty() {
                notes.push(
                    "the server has no INFO KEYSIZES (Redis 8.0 and later have it): source.keysizes is left out, and the sampled figures have no cross-check".into(),
                );
            }
        }
    }

    let target = options.sample_keys.min(dbsize);
    let per_key = elements_per_key(target);
    let mut templates = TemplateBuilder::default();
    let mut refs = Vec::new();
    let mut keys = Vec::new();
    // SCAN may return a key twice while the server rehashes: seen keys by hash.
    let hasher = RandomState::new();
    let mut seen = HashSet::new();
    let mut other_types = std::collections::BTreeMap::<String, u64>::new();
    let mut cursor = "0".to_string();
    let mut stopped_by = None;
    let mut error = None;
    progress(ProfileProgress { sampled: 0, target });
    'scan: loop {
        let reply: Result<(String, Vec<Vec<u8>>), ProfileError> = session.required(
            "SCAN",
            cmd("SCAN").arg(&cursor).arg("COUNT").arg(SCAN_COUNT),
        );
        let (next, batch) = match reply {
            Ok(reply) => reply,
            Err(e) if !keys.is_empty() => {
                error = Some(e);
                break;
            }
            Err(e) => return Err(e),
        };
        for key in batch {
            if keys.len() as u64 >= target {
                break 'scan;
            }
            if let Some(limit) = options.max_duration
                && started.elapsed() >= limit
            {
                stopped_by = Some(format!(
                    "the time bound (--max-seconds {}) ended sampling after {} of {target} keys",
                    limit.as_secs_f64(),
                    keys.len()
                ));
                break 'scan;
            }
            if !seen.insert(hasher.hash_one(&key)) {
                continue;
            }
            match sample_key(&mut session, &key, per_key) {
                Ok(Sampled::Key(observation)) => {
                    refs.push(templates.add(&key));
                    keys.push(observation);
                    progress(ProfileProgress {
                        sampled: keys.len() as u64,
                        target,
                    });
                }
                Ok(Sampled::Vanished) => {}
                Ok(Sampled::OtherType(name)) => *other_types.entry(name).or_default() += 1,
                Err(e) if !keys.is_empty() => {
                    error = Some(e);
                    break 'scan;
                }
                Err(e) => return Err(e),
            }
        }
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    if let Some(ProfileError::ServerGone { sampled, .. }) = &mut error {
        *sampled = keys.len() as u64;
    }
    if keys.is_empty() {
        return Err(ProfileError::Unexpected {
            command: "SCAN".into(),
            detail: format!(
                "DBSIZE is {dbsize}, but no key of a type membench profiles was found{}",
                describe_other_types(&other_types)
            ),
        });
    }
    if let Some(e) = &error {
        stopped_by = Some(format!("{e}; the profile holds the keys sampled before"));
    }
    if !other_types.is_empty() {
        notes.push(format!(
            "keys of other types were left out{}: membench profiles strings, hashes, lists, sets, sorted sets and streams",
            describe_other_types(&other_types)
        ));
    }
    if (keys.len() as u64) < dbsize && stopped_by.is_none() {
        notes.push(format!(
            "{} of {dbsize} keys were sampled: the first SCAN returned, in the server's hash order (unrelated to names or age)",
            keys.len()
        ));
    }
    notes.push(format!("at most {per_key} elements read per key"));
    notes.extend(session.left_out.iter().cloned());
    notes.push(format!(
        "{} commands in {:.1} s (at most {} per second)",
        session.limiter.sent(),
        started.elapsed().as_secs_f64(),
        options.max_commands_per_second
    ));
    source.sampled_keys = keys.len() as u64;
    source.complete = stopped_by.is_none();
    source.stopped_by = stopped_by;
    let templates = templates.finish(&refs);
    Ok(ProfileOutcome {
        profile: Profile {
            format: PROFILE_FORMAT,
            source,
            groups: groups::groups_of(&keys, &templates),
            notes,
        },
        error,
    })
}

fn describe_other_types(types: &std::collections::BTreeMap<String, u64>) -> String {
    if types.is_empty() {
        return String::new();
    }
    let list: Vec<String> = types
        .iter()
        .map(|(t, n)| format!("{n} of type {t}"))
        .collect();
    format!(" ({})", list.join(", "))
}
