//! The replica peak phase (`spec.peak.replica`, `membench load --replica`), run after a
//! repetition's readings (after the snapshot when both are asked) on the data it loaded: a
//! replica of the engine does a full sync (`REPLICAOF`) while the client overwrites loaded keys
//! at a given rate (`client::measurement::paced_writes`), and the phase measures what the primary's machine
//! holds meanwhile and what the replica holds once in sync. Redis and Valkey fork to send the
//! sync (their fork child copies every page the writes touch, as for a snapshot); Dragonfly
//! syncs without a fork. The writes end when the replica says it is in sync (`INFO
//! replication`: `master_link_status:up`, `master_sync_in_progress:0`) and holds the primary's
//! keys, within a bound; the replica is then detached (`REPLICAOF NO ONE`) and emptied, so
//! that the next repetition starts with a replica as empty as this one found it.

pub mod phase;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::client::connection::engine::{ControlConnection, EngineAddress, MemoryInfo};
use crate::client::connection::shards::ShardSet;
use crate::client::measurement::paced_writes::{self, Beside, PeakTarget, WriteRate};
use crate::client::measurement::phase_memory::PhaseWatch;
use crate::client::measurement::process_tree::TreeWatch;
use crate::client::phases::peak::{SnapshotReport, last_cow_size, note_cow_peak};
use crate::client::workloads::workload::Workload;
use crate::crd::{EngineSpec, MemoryBenchmarkSpec, ReplicaSpec, ReplicaStatus};
use crate::error::BenchError;

/// The longest a full sync may take before the phase fails. (Valkey and Redis wait
/// `repl-diskless-sync-delay`, 5 s by default, for more replicas before they fork.)
pub const SYNC_BOUND: Duration = Duration::from_secs(300);
/// Longer than Redis's and Valkey's period of reading their own RSS (100 ms at `hz 10`).
const RSS_REFRESH: Duration = Duration::from_millis(250);
/// How long the replica may take, once in sync, to show the primary's key count.
const KEYS_BOUND: Duration = Duration::from_secs(10);

/// The writes asked for during a replica's sync, checked.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplicaRate {
    pub writes_per_sec: u32,
}

impl ReplicaRate {
    pub fn checked(spec: &ReplicaSpec, field: &str) -> Result<Self, BenchError> {
        if spec.writes_per_sec == 0 || spec.writes_per_sec > 10_000_000 {
            return Err(BenchError::InvalidArgument {
                field: field.to_string(),
                message: format!(
                    "is {}: it must be between 1 and 10000000",
                    spec.writes_per_sec
                ),
            });
        }
        Ok(Self {
            writes_per_sec: spec.writes_per_sec,
        })
    }

    pub fn from_spec(spec: &ReplicaSpec) -> Result<Self, BenchError> {
        Self::checked(spec, "spec.peak.replica.writesPerSecond")
    }

    /// What it cannot do with a spec's workload and engines: a workload whose writes would not
    /// overwrite loaded keys, an entry in cluster mode or with shards.
    pub fn check_spec(
        &self,
        spec: &MemoryBenchmarkSpec,
        workload: &Workload,
    ) -> Result<(), BenchError> {
        let invalid = |message: String| BenchError::InvalidArgument {
            field: "spec.peak.replica".into(),
            message,
        };
        if !matches!(
            workload,
            Workload::Strings { .. } | Workload::Records { .. }
        ) {
            return Err(invalid(format!(
                "applies to the strings and records workloads (their writes overwrite loaded keys with values of the same size), not to {}",
                workload.kind()
            )));
        }
        match spec.engines.iter().position(EngineSpec::is_cluster) {
            Some(i) => Err(invalid(format!(
                "measures one engine's full sync to a replica, and spec.engines[{i}] runs in cluster mode or with shards: measure it without them, or remove peak.replica"
            ))),
            None => Ok(()),
        }
    }

    /// The phase on the replica at `address`.
    pub fn at(self, address: EngineAddress) -> Replica {
        Replica {
            writes_per_sec: self.writes_per_sec,
            address,
        }
    }
}

/// A replica phase as asked: the rate, and the replica's address (an engine of the same kind
/// that can reach the primary at the address this client uses).
#[derive(Clone, Debug)]
pub struct Replica {
    pub writes_per_sec: u32,
    pub address: EngineAddress,
}

impl Replica {
    /// What can be refused before anything is written to either server: a primary of several
    /// shards, a replica at the primary's own address, a workload whose writes would not
    /// overwrite loaded keys (as the snapshot's), a replica that does not answer, or one that
    /// holds keys (its sync would wipe them). `field` names the setting in messages.
    ///
    /// A replica still replicating from this primary is what an earlier run left attached (a
    /// client that died in the phase, whose retry this may be): its keys are a copy of the
    /// primary's, and it would take this run's load as it happens. With `flush` (the primary's
    /// data may go: `--flush`, as the operator's clients run) it is detached and emptied, and
    /// the returned note says so; without, it is refused, saying how to free it.
    pub fn check_before_writes(
        &self,
        primaries: &[EngineAddress],
        workload: &Workload,
        timeout: Duration,
        field: &str,
        flush: bool,
    ) -> Result<Option<String>, BenchError> {
        let refused = |message: String| BenchError::InvalidArgument {
            field: field.to_string(),
            message,
        };
        let [primary] = primaries else {
            return Err(refused(format!(
                "measures one engine's full sync to a replica; {} shards were given: measure one shard",
                primaries.len()
            )));
        };
        if same_server(primary, &self.address) {
            return Err(refused(format!(
                "{} is the engine's own address: the replica must be a second, empty server",
                self.address
            )));
        }
        match workload {
            Workload::Strings { .. } | Workload::Records { .. } => {}
            other => {
                return Err(refused(format!(
                    "applies to the strings and records workloads (their writes overwrite loaded keys with values of the same size), not to {}",
                    other.kind()
                )));
            }
        }
        let mut replica = ControlConnection::open(&self.address, timeout).map_err(|e| {
            refused(format!(
                "the replica at {} does not answer ({e}): start an empty server of the same engine there",
                self.address
            ))
        })?;
        let mut note = None;
        if replicates_from(&mut replica, primary)? {
            if !flush {
                return Err(refused(format!(
                    "the replica at {} already replicates from the engine at {primary} (an earlier run's sync left it attached): pass --flush to let this run detach and empty it, or detach it yourself (REPLICAOF NO ONE, then FLUSHALL)",
                    self.address
                )));
            }
            detach(&mut replica)?;
            note = Some(format!(
                "the replica at {} still replicated from the engine (an earlier run's sync left it attached): detached and emptied it before the run",
                self.address
            ));
        }
        let keys = replica.keys_in_all_databases()?;
        if keys > 0 {
            return Err(refused(format!(
                "the replica at {} holds {keys} keys, which its full sync would wipe: give an empty server",
                self.address
            )));
        }
        Ok(note)
    }
}

/// Whether two addresses name one server: the same port, and hosts that resolve alike.
fn same_server(a: &EngineAddress, b: &EngineAddress) -> bool {
    use std::net::ToSocketAddrs;
    if a.port != b.port {
        return false;
    }
    if a.host.eq_ignore_ascii_case(&b.host) {
        return true;
    }
    let resolved = |address: &EngineAddress| -> Vec<std::net::SocketAddr> {
        address
            .socket_addr()
            .to_socket_addrs()
            .map(|all| all.collect())
            .unwrap_or_default()
    };
    let theirs = resolved(b);
    resolved(a).iter().any(|address| theirs.contains(address))
}

/// What the full sync cost, on both sides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplicaReport {
    /// The primary's figures, in a snapshot's shape: its process tree just before `REPLICAOF`
    /// and at its highest during the sync, the copy-on-write of the fork that sent it
    /// (`rdb_last_cow_size`, `current_cow_peak`; Dragonfly does not fork), the sync's
    /// duration (from `REPLICAOF` until the replica said it was in sync) and the writes.
    #[serde(flatten)]
    pub primary: SnapshotReport,
    /// The primary's `mem_replication_backlog` once the replica was in sync (allocated by the
    /// first sync and kept: 10 MB by default on Valkey 9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog_bytes: Option<u64>,
    /// The primary's used_memory once the replica was in sync (its backlog included), beside
    /// which the replica's is read.
    pub primary_used_memory_after: u64,
    /// The replica at its highest during the sync: its process tree when it runs on this
    /// machine, else its container's memory cgroup when the operator read it (the high-water
    /// mark, when it rose during the sync).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_peak_bytes: Option<u64>,
    /// The replica's own `mem_replication_backlog` once in sync (part of its used_memory: Valkey
    /// allocates it as the sync ends, or with the first write after it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_backlog_bytes: Option<u64>,
    /// The replica once in sync: its memory, and its keys (the primary's, verified).
    pub replica_used_memory: u64,
    pub replica_used_memory_rss: u64,
    pub replica_keys: u64,
}

impl From<&ReplicaReport> for ReplicaStatus {
    fn from(r: &ReplicaReport) -> Self {
        ReplicaStatus {
            primary: (&r.primary).into(),
            backlog_bytes: r.backlog_bytes,
            primary_used_memory_after: r.primary_used_memory_after,
            replica_used_memory: r.replica_used_memory,
            replica_used_memory_rss: r.replica_used_memory_rss,
            replica_keys: r.replica_keys,
            replica_peak_bytes: r.replica_peak_bytes,
        }
    }
}

/// The replica's `INFO replication`, read once, as a lookup of its fields ("" when absent).
fn replication_fields(
    replica: &mut ControlConnection,
) -> Result<impl Fn(&str) -> String + use<>, BenchError> {
    let replication = replica.info("replication")?;
    Ok(move |name: &str| replication.get(name).cloned().unwrap_or_default())
}

/// Whether the replica says its full sync is done and it holds the primary's `keys`.
fn in_sync(replica: &mut ControlConnection, keys: u64) -> Result<bool, BenchError> {
    let field = replication_fields(replica)?;
    // Dragonfly may call the link up before its full sync has begun: its keys tell.
    Ok(field("master_link_status") == "up"
        && field("master_sync_in_progress") == "0"
        && replica.keys_in_all_databases()? == keys)
}

/// Whether `replica` is a replica of `primary` (its `INFO replication` names the primary's
/// host and port, as this client reaches it and as the phase's `REPLICAOF` gave them).
fn replicates_from(
    replica: &mut ControlConnection,
    primary: &EngineAddress,
) -> Result<bool, BenchError> {
    let field = replication_fields(replica)?;
    Ok(matches!(field("role").as_str(), "slave" | "replica")
        && field("master_host") == primary.host
        && field("master_port") == primary.port.to_string())
}

/// The replica's process id, as its INFO reports it.
fn replica_process(replica: &mut ControlConnection) -> Option<u32> {
    replica.info("server").ok()?.get("process_id")?.parse().ok()
}

/// Runs the phase: the replica at `replica.address` syncs from the single engine of `shards`
/// under paced overwrites of every loaded item, the primary's process tree sampled meanwhile
/// when it is on this machine; the replica is detached and emptied afterwards, whether the
/// sync succeeded or not.
pub fn run(
    shards: &mut ShardSet,
    replica: &Replica,
    target: &PeakTarget<'_>,
    before: &MemoryInfo,
) -> Result<ReplicaReport, BenchError> {
    let mut link = ControlConnection::open(&replica.address, target.pacing.connect_timeout)?;
    let held = link.keys_in_all_databases()?;
    if held > 0 {
        return Err(BenchError::InvalidArgument {
            field: "peak.replica".into(),
            message: format!(
                "the replica at {} holds {held} keys, which its full sync would wipe: give an empty server",
                replica.address
            ),
        });
    }
    let primary = shards.first().address().clone();
    if let Some(password) = &primary.password {
        link.query::<()>(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("masterauth")
                .arg(password),
        )?;
    }
    let keys = shards.first().keys_in_all_databases()?;
    let replica_watch = TreeWatch::start(replica_process(&mut link));
    let watch = PhaseWatch::start(target.process_id, target.container);
    let started = Instant::now();
    let mut cow_peak_bytes = None;
    let beside = Beside {
        phase: "replica",
        command: "REPLICAOF",
        rate: WriteRate {
            writes_per_sec: replica.writes_per_sec,
            write_share: 1.0,
        },
        bound: SYNC_BOUND,
        unfinished: format!(
            "the replica at {} did not report itself in sync (INFO replication: master_link_status:up, master_sync_in_progress:0) holding the primary's {keys} keys",
            replica.address
        ),
    };
    let result = link
        .query::<()>(redis::cmd("REPLICAOF").arg(&primary.host).arg(primary.port))
        .and_then(|_| {
            paced_writes::write_until(shards, target, &beside, &mut |shards| {
                note_cow_peak(&shards.first().info("persistence")?, &mut cow_peak_bytes);
                in_sync(&mut link, keys)
            })
        });
    let duration = started.elapsed().as_secs_f64();
    let tree = watch.finish(result.is_ok());
    // The replica's process tree where it runs on this machine, else its container read
    // at the same marks as the primary's.
    let replica_peak_bytes = replica_watch
        .finish()
        .peak_bytes
        .or(tree.replica_peak_bytes);
    let measured = result.and_then(|writes| {
        // Redis and Valkey read their RSS every 100 ms (serverCron): wait for a reading taken
        // after the sync (one right at its end said 22 MB of a replica whose process held 72).
        std::thread::sleep(RSS_REFRESH);
        let replica_info = link.info("memory")?;
        let replica_memory = MemoryInfo::from_info(&replica_info)?;
        let replica_keys = settled_keys(&mut link, keys)?;
        let cow_bytes = last_cow_size(shards.first())?;
        let primary_memory = shards.first().info("memory")?;
        Ok(ReplicaReport {
            primary: SnapshotReport::of(
                tree,
                before,
                duration,
                writes,
                replica.writes_per_sec,
                cow_bytes,
                cow_peak_bytes,
            ),
            backlog_bytes: backlog(&primary_memory),
            replica_backlog_bytes: backlog(&replica_info),
            primary_used_memory_after: MemoryInfo::from_info(&primary_memory)?.used_memory,
            replica_peak_bytes,
            replica_used_memory: replica_memory.used_memory,
            replica_used_memory_rss: replica_memory.used_memory_rss,
            replica_keys,
        })
    });
    // Detached and emptied whatever happened, so that neither the next repetition's FLUSHALL
    // nor its load reaches the replica.
    let detached = detach(&mut link);
    let report = measured?;
    detached?;
    Ok(report)
}

/// `mem_replication_backlog` of an `INFO memory`, where the engine reports it.
fn backlog(memory: &std::collections::HashMap<String, String>) -> Option<u64> {
    memory
        .get("mem_replication_backlog")
        .and_then(|v| v.parse::<u64>().ok())
}

/// The replica's keys once in sync, verified against the primary's `keys` (a replica that
/// lost some in the sync fails the phase).
fn settled_keys(replica: &mut ControlConnection, keys: u64) -> Result<u64, BenchError> {
    let started = Instant::now();
    loop {
        let held = replica.keys_in_all_databases()?;
        if held == keys {
            return Ok(held);
        }
        if started.elapsed() >= KEYS_BOUND {
            return Err(BenchError::CountMismatch {
                message: format!(
                    "the replica at {} holds {held} keys once in sync, the primary {keys}",
                    replica.address()
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `REPLICAOF NO ONE`, then `FLUSHALL`: the replica as empty as the phase found it.
fn detach(replica: &mut ControlConnection) -> Result<(), BenchError> {
    replica.query::<()>(redis::cmd("REPLICAOF").arg("NO").arg("ONE"))?;
    replica.flush_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(addr: &str) -> EngineAddress {
        EngineAddress::parse(addr, None).unwrap()
    }

    #[test]
    fn a_rate_outside_its_range_is_refused_naming_the_field() {
        for rate in [0, 10_000_001] {
            let refusal = ReplicaRate::from_spec(&ReplicaSpec {
                writes_per_sec: rate,
            })
            .unwrap_err()
            .to_string();
            assert!(
                refusal.contains("spec.peak.replica.writesPerSecond")
                    && refusal.contains("between 1 and 10000000"),
                "{refusal}"
            );
        }
    }

    #[test]
    fn a_replica_at_the_primarys_own_address_is_the_same_server() {
        assert!(same_server(
            &address("127.0.0.1:6379"),
            &address("localhost:6379")
        ));
        assert!(!same_server(
            &address("127.0.0.1:6379"),
            &address("127.0.0.1:6380")
        ));
    }
}
