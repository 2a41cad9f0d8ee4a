//! `membench profile --cluster`: every primary of a cluster that owns slots, found with
//! `CLUSTER NODES` on the node given, profiled one after the other and merged into one
//! profile (`profile::merge`). The limits hold for the whole profile: one node is read at a
//! time, each under the full `--max-commands-per-sec` (so no node and no moment sees more);
//! `--sample-keys` is split over the primaries by their DBSIZE; `--max-seconds` bounds the
//! whole run, each node getting an equal part of the time left.

use std::time::{Duration, Instant};

use redis::cmd;

use crate::client::connection::engine::{ControlConnection, EngineAddress, parse_info};
use crate::profile::merge::merge_profiles;

use super::{ProfileError, ProfileOptions, ProfileOutcome, ProfileProgress, profile_server};

/// A primary as `CLUSTER NODES` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Primary {
    pub host: String,
    pub port: u16,
    /// Slot ranges it owns (the line's slot fields).
    pub slot_ranges: usize,
}

/// The primaries that own slots, from a `CLUSTER NODES` reply. A node without an address
/// (`:0@0`, or `myself` before it learnt its own) takes `seed_host`.
pub fn primaries_of(nodes: &str, seed_host: &str) -> Vec<Primary> {
    nodes
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let flags = fields.get(2)?;
            let flag_list: Vec<&str> = flags.split(',').collect();
            if !flag_list.contains(&"master")
                || flag_list
                    .iter()
                    .any(|f| matches!(*f, "fail" | "noaddr" | "handshake"))
            {
                return None;
            }
            let slot_ranges = fields.len().saturating_sub(8);
            if slot_ranges == 0 {
                return None;
            }
            let address = fields.get(1)?.split(['@', ',']).next()?;
            let (host, port) = address.rsplit_once(':')?;
            let host = if host.is_empty() { seed_host } else { host };
            Some(Primary {
                host: host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string(),
                port: port.parse().ok()?,
                slot_ranges,
            })
        })
        .collect()
}

/// Profiles every primary of the cluster `seed` belongs to, and merges what they hold.
pub fn profile_cluster(
    seed: &EngineAddress,
    options: &ProfileOptions,
    connect_timeout: Duration,
    progress: &mut dyn FnMut(ProfileProgress),
) -> Result<ProfileOutcome, ProfileError> {
    let started = Instant::now();
    let mut control = ControlConnection::open(seed, connect_timeout)?;
    let unexpected = |command: &str, e: redis::RedisError| ProfileError::Unexpected {
        command: command.into(),
        detail: e.to_string(),
    };
    let info: String = control
        .query_unclassified(cmd("INFO").arg("cluster"))
        .map_err(|e| unexpected("INFO cluster", e))?;
    if parse_info(&info).get("cluster_enabled").map(String::as_str) != Some("1") {
        return Err(ProfileError::NotACluster {
            address: seed.to_string(),
        });
    }
    let nodes: String = control
        .query_unclassified(cmd("CLUSTER").arg("NODES"))
        .map_err(|e| unexpected("CLUSTER NODES", e))?;
    drop(control);
    let primaries = primaries_of(&nodes, &seed.host);
    if primaries.is_empty() {
        return Err(ProfileError::Unexpected {
            command: "CLUSTER NODES".into(),
            detail: "no primary owns a slot: the cluster holds no keys yet".into(),
        });
    }
    let mut connections = Vec::new();
    for primary in &primaries {
        let address = EngineAddress {
            host: primary.host.clone(),
            port: primary.port,
            password: seed.password.clone(),
        };
        let mut control = ControlConnection::open(&address, connect_timeout)?;
        let keys = control.dbsize()?;
        connections.push((address, control, keys));
    }
    let total_keys: u64 = connections.iter().map(|(_, _, keys)| keys).sum();
    if total_keys == 0 {
        return Err(ProfileError::Empty {
            address: format!("the cluster of {seed} ({} primaries)", primaries.len()),
            db: options.db,
            others: String::new(),
        });
    }
    let target = options.sample_keys.min(total_keys);
    let mut profiles = Vec::new();
    let mut labels = Vec::new();
    let mut error = None;
    let mut sampled_before = 0u64;
    let holding: Vec<_> = connections.into_iter().filter(|(_, _, k)| *k > 0).collect();
    let count = holding.len();
    for (i, (address, mut control, keys)) in holding.into_iter().enumerate() {
        let share = (options.sample_keys as f64 * keys as f64 / total_keys as f64).ceil() as u64;
        let max_duration = options.max_duration.map(|limit| {
            let left = limit.saturating_sub(started.elapsed());
            left / (count - i) as u32
        });
        let node_options = ProfileOptions {
            sample_keys: share.max(1),
            max_duration,
            ..options.clone()
        };
        let mut node_progress = |p: ProfileProgress| {
            if p.stage == "sampling" {
                progress(ProfileProgress {
                    sampled: sampled_before + p.sampled,
                    target,
                    ..p
                })
            } else {
                progress(p)
            }
        };
        match profile_server(&mut control, &node_options, &mut node_progress) {
            Ok(outcome) => {
                sampled_before += outcome.profile.source.sampled_keys;
                let mut profile = outcome.profile;
                // The merged profile says it covers the cluster; this node's note that it
                // holds its own slots only no longer applies.
                profile
                    .notes
                    .retain(|n| !n.contains("the server is a cluster node"));
                profiles.push(profile);
                labels.push(address.to_string());
                if outcome.error.is_some() {
                    error = outcome.error;
                    break;
                }
                // Stopped (SIGINT, SIGTERM): the next primaries are not read.
                if options.stop.requested() {
                    break;
                }
            }
            Err(e) if !profiles.is_empty() => {
                error = Some(e);
                break;
            }
            Err(e) => return Err(e),
        }
    }
    let mut profile = merge_profiles(&profiles, &labels);
    if profiles.len() < count {
        profile.source.complete = false;
        let why = format!(
            "{} of {count} primaries were profiled: {}",
            profiles.len(),
            error
                .as_ref()
                .map_or_else(|| "the others were not reached".into(), |e| e.to_string())
        );
        profile.source.stopped_by = Some(match profile.source.stopped_by.take() {
            Some(before) => format!("{before}; {why}"),
            None => why,
        });
        // The keys of the primaries not read are not in the profile.
        profile.source.keys = profiles.iter().map(|p| p.source.keys).sum();
    }
    Ok(ProfileOutcome { profile, error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_primaries_are_the_masters_that_own_slots() {
        let nodes = "\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7002@17002,node-b master - 0 0 2 connected 5461-10922 10923
c3 :7003@17003 master - 0 0 3 connected 10924-16383
d4 127.0.0.1:7004@17004 slave a1 0 0 1 connected
e5 127.0.0.1:7005@17005 master - 0 0 4 connected
f6 127.0.0.1:7006@17006 master,fail - 0 0 5 connected 100
";
        let primaries = primaries_of(nodes, "10.0.0.9");
        let found: Vec<(String, u16, usize)> = primaries
            .into_iter()
            .map(|p| (p.host, p.port, p.slot_ranges))
            .collect();
        assert_eq!(
            found,
            vec![
                ("127.0.0.1".into(), 7001, 1),
                ("127.0.0.1".into(), 7002, 2),
                ("10.0.0.9".into(), 7003, 1),
            ]
        );
    }
}
