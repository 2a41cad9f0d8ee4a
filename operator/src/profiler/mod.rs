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
mod rdb_file;
#[cfg(test)]
mod rdb_file_tests;
mod selection;
mod walk;

use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, Instant};

use redis::cmd;

use crate::client::connection::engine::{ControlConnection, identify, parse_info};
use crate::client::connection::stop_request::StopRequest;
use crate::client::workloads::draws::KeyGenerator;
use crate::profile::model::{KeyType, PROFILE_FORMAT, Profile, ProfileSource};

pub use cluster::profile_cluster;
pub use error::ProfileError;
use groups::PlannedGroup;
pub use key_sample::{ELEMENTS_PER_KEY, MOST_ELEMENTS_PER_KEY, elements_per_key, is_integer};
use key_sample::{KeyObservation, Sampled, Session, sample_key};
pub use rdb_file::{RdbProfileOptions, profile_rdb_file};
pub use selection::{BIG_KEY_SHARE, MIN_SAMPLE_PER_GROUP};
use walk::{Interruption, Walk, WalkedKey, size_keys, walk_names};

pub use walk::SCAN_COUNT;
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
    /// Asked (SIGINT, SIGTERM) to end now, keeping what was read.
    pub stop: StopRequest,
}

/// How far sampling has got, for a progress bar.
#[derive(Clone, Copy, Debug)]
pub struct ProfileProgress {
    /// What is under way: `walking` (the names), `sampling` (the keys read in full),
    /// `sizing` (every other key's size).
    pub stage: &'static str,
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

    // The bounds every phase ends at: the time bound and a stop asked for (SIGINT,
    // SIGTERM), saying how far the phase got.
    let limit = options.max_duration;
    let stop_request = options.stop.clone();
    let bound = move |what: &str| -> Option<String> {
        if let Some(cause) = stop_request.cause() {
            return Some(format!(
                "{} stopped the profile {what}",
                cause.signal_name()
            ));
        }
        if let Some(limit) = limit
            && started.elapsed() >= limit
        {
            return Some(format!(
                "the time bound (--max-seconds {}) ended the profile {what}",
                limit.as_secs_f64()
            ));
        }
        None
    };
    let mut stopped_by: Option<String> = None;
    let mut error: Option<ProfileError> = None;
    // A signal can break the command under way (EINTR) a moment before the signal thread asks
    // for the stop: that is the stop, not a lost server.
    let stop_request = options.stop.clone();
    let signalled = move |e: ProfileError, what: &str| -> Interruption {
        let cause = match &e {
            ProfileError::ServerGone { detail, .. } => stop_request.behind_error_text(detail),
            _ => None,
        };
        match cause {
            Some(cause) => Interruption::Bound(format!(
                "{} stopped the profile {what}",
                cause.signal_name()
            )),
            None => Interruption::Failed(e),
        }
    };
    let interrupted = |i: Interruption,
                       stopped_by: &mut Option<String>,
                       error: &mut Option<ProfileError>| {
        match i {
            Interruption::Bound(why) => *stopped_by = Some(why),
            Interruption::Failed(e) => *error = Some(e),
        }
    };

    // 1. The walk: every name and type, no command per key (where SCAN takes TYPE).
    let mut walk = Walk::default();
    progress(ProfileProgress {
        stage: "walking",
        sampled: 0,
        target: dbsize,
    });
    let walked = walk_names(&mut session, &mut walk, &mut |walked| {
        if walked % 1000 == 0 {
            progress(ProfileProgress {
                stage: "walking",
                sampled: walked,
                target: dbsize,
            });
        }
        bound(&format!(
            "while walking the keyspace, after {walked} of {dbsize} keys"
        ))
    });
    if let Err(i) = walked {
        let i = match i {
            Interruption::Failed(e) => signalled(
                e,
                &format!(
                    "while walking the keyspace, after {} of {dbsize} keys",
                    walk.keys.len()
                ),
            ),
            bound => bound,
        };
        interrupted(i, &mut stopped_by, &mut error);
    }
    let walked_all = stopped_by.is_none() && error.is_none();
    if walk.keys.is_empty() {
        if let Some(e) = error {
            return Err(e);
        }
        if let Some(why) = stopped_by {
            return Err(ProfileError::StoppedEarly {
                detail: format!("{why}: no key was read, so there is no profile to print"),
            });
        }
        return Err(ProfileError::Unexpected {
            command: "SCAN".into(),
            detail: format!(
                "DBSIZE is {dbsize}, but no key of a type membench profiles was found{}",
                describe_other_types(&walk.other_types)
            ),
        });
    }

    // 2. The groups by template and type, counted exactly.
    let (mut plan, uncounted_first_parts) = groups::plan_by_template(&walk.keys);
    notes.extend(groups::uncounted_first_parts_note(uncounted_first_parts));

    // 3. The sample: every group enough to bound its error, the keys drawn uniformly.
    let budget = options.sample_keys;
    let sizes = selection::sample_sizes(
        &plan.iter().map(|g| g.3.len() as u64).collect::<Vec<_>>(),
        budget,
    );
    let mut generator = KeyGenerator::new(RandomState::new().hash_one(dbsize));
    let mut chosen: Vec<usize> = Vec::new();
    for (group, size) in plan.iter().zip(&sizes) {
        let picks = selection::choose(group.3.len(), *size as usize, &mut generator);
        chosen.extend(picks.into_iter().map(|p| group.3[p]));
    }
    // Read in a fixed shuffle, so that a stopped profile has read every group alike.
    let mut order: Vec<usize> = chosen;
    order.sort_by_key(|i| read_order(*i));
    let target = order.len() as u64;
    let per_key = elements_per_key(target);
    let mut observations: std::collections::HashMap<usize, KeyObservation> =
        std::collections::HashMap::new();
    let mut other_types = walk.other_types.clone();
    if stopped_by.is_none() && error.is_none() {
        progress(ProfileProgress {
            stage: "sampling",
            sampled: 0,
            target,
        });
        for (n, &i) in order.iter().enumerate() {
            if let Some(why) = bound(&format!("after {n} of the {target} keys to sample")) {
                stopped_by = Some(why);
                break;
            }
            match sample_key(&mut session, &walk.keys[i].name, per_key) {
                Ok(Sampled::Key(observation)) => {
                    if observation.key_type == Some(walk.keys[i].key_type) {
                        walk.keys[i].size = observed_size(&observation);
                        observations.insert(i, observation);
                    }
                }
                Ok(Sampled::Vanished) => {}
                Ok(Sampled::OtherType(name)) => *other_types.entry(name).or_default() += 1,
                Err(e) => {
                    let what = format!("after {n} of the {target} keys to sample");
                    interrupted(signalled(e, &what), &mut stopped_by, &mut error);
                    break;
                }
            }
            progress(ProfileProgress {
                stage: "sampling",
                sampled: n as u64 + 1,
                target,
            });
        }
    }
    if observations.is_empty() {
        if let Some(e) = error {
            return Err(e);
        }
        return Err(ProfileError::StoppedEarly {
            detail: format!(
                "{}: {} keys were walked but none was read, so there is no profile to print",
                stopped_by.unwrap_or_else(|| "the sample found no key".into()),
                walk.keys.len()
            ),
        });
    }

    // 4. Every other key's size, one O(1) command each: exact element counts, and the big
    // keys.
    let mut sized_all = false;
    if stopped_by.is_none() && error.is_none() {
        let mut to_size: Vec<WalkedKey> = Vec::new();
        let mut places = Vec::new();
        for (i, key) in walk.keys.iter_mut().enumerate() {
            if !observations.contains_key(&i) {
                places.push(i);
                to_size.push(key.clone());
            }
        }
        let total = to_size.len() as u64;
        let mut sized = 0u64;
        let result = size_keys(&mut session, &mut to_size, &mut sized, &mut |done| {
            if done % 1000 == 0 {
                progress(ProfileProgress {
                    stage: "sizing",
                    sampled: done,
                    target: total,
                });
            }
            bound(&format!(
                "while reading key sizes, after {done} of {total} keys"
            ))
        });
        for (place, key) in places.into_iter().zip(to_size).take(sized as usize) {
            walk.keys[place].size = key.size;
        }
        match result {
            Ok(()) => sized_all = true,
            Err(Interruption::Failed(e)) => interrupted(
                signalled(
                    e,
                    &format!("while reading key sizes, after {sized} of {total} keys"),
                ),
                &mut stopped_by,
                &mut error,
            ),
            Err(i) => interrupted(i, &mut stopped_by, &mut error),
        }
    }

    // 5. The big keys, each its own group, read as deeply as a key is read.
    if sized_all {
        groups::split_big_keys(&mut plan, &walk.keys);
        for group in plan.iter().filter(|g| g.2) {
            let i = group.3[0];
            if let Some(why) = bound("while reading the big keys") {
                stopped_by = Some(why);
                break;
            }
            match sample_key(&mut session, &walk.keys[i].name, MOST_ELEMENTS_PER_KEY) {
                Ok(Sampled::Key(observation)) if observation.key_type == Some(group.1) => {
                    walk.keys[i].size = observed_size(&observation);
                    observations.insert(i, observation);
                }
                Ok(_) => {}
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
    }
    if let Some(ProfileError::ServerGone { sampled, .. }) = &mut error {
        *sampled = observations.len() as u64;
    }
    if let Some(e) = &error {
        stopped_by = Some(format!("{e}; the profile holds the keys read before"));
    }

    let planned: Vec<PlannedGroup<'_>> = plan
        .iter()
        .map(|(template, key_type, big_key, keys)| PlannedGroup {
            template: template.clone(),
            key_type: *key_type,
            big_key: *big_key,
            keys: keys.iter().map(|&i| &walk.keys[i]).collect(),
            sampled: keys.iter().filter_map(|i| observations.get(i)).collect(),
        })
        .collect();
    let groups = groups::groups_of(&planned);
    let left_out = planned.iter().filter(|g| g.sampled.is_empty()).count();
    if left_out > 0 {
        notes.push(format!(
            "{left_out} group(s) of the {} found had no key read before the profile ended: they are left out and the shares are of the others",
            planned.len()
        ));
    }
    if !other_types.is_empty() {
        notes.push(format!(
            "keys of other types were left out{}: membench profiles strings, hashes, lists, sets, sorted sets and streams",
            describe_other_types(&other_types)
        ));
    }
    if (observations.len() as u64) < source.keys {
        notes.push(format!(
            "{} of {} keys were sampled (read in full), drawn uniformly within each group",
            observations.len(),
            walk.keys.len()
        ));
    }
    if walked_all {
        notes.push(format!(
            "{} keys walked ({}): every group's key count is exact; {} of them read in full (at least {} of every group, all of a smaller one), the rest drawn uniformly within each group",
            walk.keys.len(),
            if walk.typed {
                "SCAN ... TYPE, no command per key"
            } else {
                "SCAN without TYPE on this server: one TYPE per key"
            },
            observations.len(),
            selection::MIN_SAMPLE_PER_GROUP
        ));
    } else {
        notes.push(format!(
            "{} of {dbsize} keys walked before the profile ended: the groups' counts are of those, scaled to DBSIZE",
            walk.keys.len()
        ));
    }
    if sized_all {
        notes.push(format!(
            "every key's size read (STRLEN, HLEN, LLEN, SCARD, ZCARD, XLEN): element counts are exact; {} big key(s) (at least {:.0}% of the keyspace's elements or string bytes) kept as their own groups",
            plan.iter().filter(|g| g.2).count(),
            selection::BIG_KEY_SHARE * 100.0
        ));
    } else {
        notes.push(
            "the key sizes were not all read before the profile ended: element counts are those of the keys read, and big keys were not looked for".into(),
        );
    }
    notes.push(format!(
        "at most {per_key} elements read per key ({MOST_ELEMENTS_PER_KEY} of a big key)"
    ));
    notes.extend(session.left_out.iter().cloned());
    notes.push(format!(
        "{} commands in {:.1} s (at most {} per second)",
        session.limiter.sent(),
        started.elapsed().as_secs_f64(),
        options.max_commands_per_second
    ));
    source.sampled_keys = observations.len() as u64;
    source.complete = stopped_by.is_none();
    source.stopped_by = stopped_by;
    Ok(ProfileOutcome {
        profile: Profile {
            format: PROFILE_FORMAT,
            source,
            groups,
            notes,
        },
        error,
    })
}

/// A key's place in the order keys are read: a fixed shuffle of the walk's order (a
/// multiplicative hash of the position), so that a profile stopped early has read every group
/// in proportion.
fn read_order(i: usize) -> u64 {
    (i as u64)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(17)
}

/// A sampled key's size as the size pass reads it: a string's length, else its elements.
fn observed_size(observation: &KeyObservation) -> Option<u64> {
    match observation.key_type {
        Some(KeyType::String) => observation.values.first().map(|v| u64::from(v.length)),
        _ => observation.elements.filter(|n| *n > 0),
    }
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
