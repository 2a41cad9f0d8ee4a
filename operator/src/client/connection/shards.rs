//! A sharded cluster as the client sees it: one control connection per shard, the join that
//! makes N empty cluster-mode nodes one cluster (`CLUSTER MEET` from shard 0, the slots split
//! evenly, a bounded wait until every shard says `cluster_state:ok` and knows all N), the
//! figures read on every shard and summed, and the load's connections, one pipelined
//! connection per shard that each batch is split over by the owner of its keys.
//!
//! One address is one engine, exactly as before: no join, no routing, nothing renamed.

use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

use crate::client::connection::engine::{ControlConnection, EngineAddress, MemoryInfo};
use crate::client::connection::resp::{CommandBuffer, PipelinedConnection, ReplyTally};
use crate::client::connection::slots::{SLOTS, SlotTable, even_range};
use crate::error::BenchError;

/// The most shards a benchmark joins: the compact result's per-shard figures are sized for
/// this many (`client::pod_io::result`); the CRD's rule on `engines[].shards` says the same.
pub const MAX_SHARDS: usize = crate::formats::MAX_SHARDS as usize;

/// How long the join waits for every shard to agree on the cluster.
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(30);

/// One shard: where it listens and the control connection to it.
pub struct Shard {
    pub address: EngineAddress,
    pub control: ControlConnection,
}

/// The engines of one measurement: one, or the shards of a cluster in `--addr` order.
pub struct ShardSet {
    shards: Vec<Shard>,
    /// Which shard owns each slot, once joined (None for one engine: it takes every command).
    table: Option<SlotTable>,
}

/// Checks how many addresses were given: at least one, at most [`MAX_SHARDS`].
pub fn check_shard_count(count: usize) -> Result<(), BenchError> {
    if count == 0 || count > MAX_SHARDS {
        return Err(BenchError::InvalidArgument {
            field: "--addr".into(),
            message: format!(
                "{count} addresses given: give one engine's address, or 2 to {MAX_SHARDS} shards' (one --addr each)"
            ),
        });
    }
    Ok(())
}

/// Refuses two addresses that name the same node: the same host and port, or names that
/// resolve to the same socket address (`localhost:6379` and `127.0.0.1:6379`).
pub fn check_distinct(addresses: &[EngineAddress]) -> Result<(), BenchError> {
    use std::net::ToSocketAddrs;
    let resolved: Vec<Vec<std::net::SocketAddr>> = addresses
        .iter()
        .map(|a| {
            (a.host.as_str(), a.port)
                .to_socket_addrs()
                .map(Iterator::collect)
                .unwrap_or_default()
        })
        .collect();
    for (i, a) in addresses.iter().enumerate() {
        for (j, b) in addresses.iter().enumerate().skip(i + 1) {
            let same_name = a.host.eq_ignore_ascii_case(&b.host) && a.port == b.port;
            let same_socket = resolved[i].iter().any(|s| resolved[j].contains(s));
            if same_name || same_socket {
                return Err(BenchError::InvalidArgument {
                    field: "--addr".into(),
                    message: format!(
                        "--addr {a} and --addr {b} (the {} and {} given) name the same node: give each shard's node once",
                        ordinal(i + 1),
                        ordinal(j + 1)
                    ),
                });
            }
        }
    }
    Ok(())
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// `shard I (HOST:PORT)`, how errors and reports name a shard.
pub fn shard_name(index: usize, address: &EngineAddress) -> String {
    format!("shard {index} ({address})")
}

impl ShardSet {
    /// Opens a control connection to each address; an error names the shard it is about.
    pub fn open(addresses: &[EngineAddress], timeout: Duration) -> Result<Self, BenchError> {
        check_shard_count(addresses.len())?;
        let mut shards = Vec::with_capacity(addresses.len());
        for (index, address) in addresses.iter().enumerate() {
            let control = ControlConnection::open(address, timeout)
                .map_err(|e| name_shard(addresses.len(), index, address, e))?;
            shards.push(Shard {
                address: address.clone(),
                control,
            });
        }
        Ok(Self {
            shards,
            table: None,
        })
    }

    pub fn len(&self) -> usize {
        self.shards.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// Whether this is a cluster of several shards.
    pub fn is_sharded(&self) -> bool {
        self.shards.len() > 1
    }

    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// Shard 0's control connection: the one engine, or the shard that identifies the build.
    pub fn first(&mut self) -> &mut ControlConnection {
        &mut self.shards[0].control
    }

    /// The slot table of a joined cluster.
    pub fn table(&self) -> Option<&SlotTable> {
        self.table.as_ref()
    }

    /// `f` on every shard in order, its results in shard order; an error names the shard.
    pub fn each<T>(
        &mut self,
        mut f: impl FnMut(&mut ControlConnection, &EngineAddress) -> Result<T, BenchError>,
    ) -> Result<Vec<T>, BenchError> {
        let count = self.shards.len();
        self.shards
            .iter_mut()
            .enumerate()
            .map(|(index, shard)| {
                f(&mut shard.control, &shard.address)
                    .map_err(|e| name_shard(count, index, &shard.address, e))
            })
            .collect()
    }

    /// `INFO memory` of every shard.
    pub fn memory(&mut self) -> Result<Vec<MemoryInfo>, BenchError> {
        self.each(|control, _| control.memory())
    }

    /// `INFO memory` of every shard at the baseline, with what each holds for membench's
    /// control connection at that moment (0 where an engine reports no figure for one client),
    /// both from one pipeline (`ControlConnection::memory_and_connections`). A connection's
    /// reply buffer starts at 16 KiB and the engine's cron shrinks it to under 2 KiB once it
    /// is idle (Valkey 9.1: `rbs` 16384 -> 1792), so the control connection's own memory can
    /// move by about 14 KiB between readings; `data_memory` counts it as it was here. The
    /// pipeline is sent once before the reading: the first use of each of its commands
    /// allocates the engine's latency histogram for it (Redis 7 and later, Valkey: about
    /// 23 KiB a command), which must not be counted as data.
    pub fn baseline_memory(&mut self) -> Result<(Vec<MemoryInfo>, Vec<u64>), BenchError> {
        self.each(|control, _| control.memory_and_connections())?;
        let readings = self.each(|control, _| control.memory_and_connections())?;
        Ok(readings
            .into_iter()
            .map(|(memory, held)| (memory, held.own))
            .unzip())
    }

    /// `INFO memory` of every shard as the data alone would make it: less what the engine holds
    /// for every other connection (the load's, whose query buffer batches in flight leave
    /// larger), and with the control connection counted as it was when `at_baseline` was read
    /// (`baseline_memory`), whatever the engine's cron did to its buffers since. Both are
    /// `tot-mem` of `CLIENT INFO` and `CLIENT LIST`, which the engine computes when asked
    /// (INFO's `mem_clients_normal` is refreshed only in its cron); an engine without them
    /// (Dragonfly) is read as it is.
    pub fn data_memory(&mut self, at_baseline: &[u64]) -> Result<Vec<MemoryInfo>, BenchError> {
        let readings = self.each(|control, _| control.memory_and_connections())?;
        Ok(readings
            .into_iter()
            .zip(at_baseline)
            .map(|((mut reading, held), then)| {
                reading.used_memory =
                    (reading.used_memory + then).saturating_sub(held.own + held.others);
                reading
            })
            .collect())
    }

    /// Makes the shards one cluster, unless they already form one: each must be in cluster
    /// mode and own no slots nor know another node; each gets its even share of the slots
    /// (and a config epoch of its own, so that no epoch collision has to be resolved), shard 0
    /// meets every other, and then every shard must say `cluster_state:ok`, know all N nodes
    /// and see all 16,384 slots assigned within `timeout`. The slot table is read back from
    /// what each shard says it owns.
    pub fn join(&mut self, timeout: Duration) -> Result<(), BenchError> {
        let count = self.shards.len();
        let infos = self.each(|control, _| control.cluster_info())?;
        let number = |info: &HashMap<String, String>, field: &str| -> u64 {
            info.get(field).and_then(|v| v.parse().ok()).unwrap_or(0)
        };
        let formed = infos.iter().all(|info| {
            number(info, "cluster_known_nodes") == count as u64
                && number(info, "cluster_slots_assigned") == u64::from(SLOTS)
        });
        if !formed {
            for (index, info) in infos.iter().enumerate() {
                let (known, assigned) = (
                    number(info, "cluster_known_nodes"),
                    number(info, "cluster_slots_assigned"),
                );
                if known > 1 || assigned > 0 {
                    return Err(BenchError::EngineStart(format!(
                        "{} already belongs to another cluster (it knows {known} nodes and sees {assigned} slots assigned), not one of exactly these {count}: give membench {count} empty cluster-mode nodes (CLUSTER RESET HARD empties one), or a cluster of exactly these {count}",
                        shard_name(index, &self.shards[index].address)
                    )));
                }
            }
            for index in 0..count {
                let (first, last) = even_range(index, count);
                let shard = &mut self.shards[index];
                // An engine that refuses a new epoch keeps its own; the cluster then resolves
                // the collision itself, only more slowly.
                let _ = shard.control.query::<String>(
                    redis::cmd("CLUSTER")
                        .arg("SET-CONFIG-EPOCH")
                        .arg(index as u64 + 1),
                );
                shard
                    .control
                    .add_slots(first, last)
                    .map_err(|e| name_shard(count, index, &shard.address, e))?;
            }
            for index in 1..count {
                let (host, port) = meet_address(&self.shards[index].address)?;
                let first = &mut self.shards[0];
                first
                    .control
                    .query::<String>(redis::cmd("CLUSTER").arg("MEET").arg(&host).arg(port))
                    .map_err(|e| name_shard(count, 0, &first.address, e))?;
            }
        }
        self.wait_until_joined(timeout)?;
        self.table = Some(self.read_slot_table()?);
        Ok(())
    }

    /// Waits until every shard says `cluster_state:ok`, knows all the shards and sees every
    /// slot assigned; the error names the first shard that did not get there, and how far it got.
    fn wait_until_joined(&mut self, timeout: Duration) -> Result<(), BenchError> {
        let count = self.shards.len();
        let started = Instant::now();
        loop {
            let infos = self.each(|control, _| control.cluster_info())?;
            let behind = infos.iter().position(|info| {
                info.get("cluster_state").map(String::as_str) != Some("ok")
                    || info.get("cluster_known_nodes").map(String::as_str)
                        != Some(count.to_string().as_str())
                    || info.get("cluster_slots_assigned").map(String::as_str) != Some("16384")
            });
            let Some(index) = behind else {
                return Ok(());
            };
            if started.elapsed() >= timeout {
                let field = |name: &str| infos[index].get(name).cloned().unwrap_or_default();
                return Err(BenchError::EngineStart(format!(
                    "{} did not join the {count}-shard cluster within {} s: cluster_state:{}, cluster_known_nodes:{} (of {count}), cluster_slots_assigned:{}. Check that the shards reach each other on their cluster bus port (the engine port + 10000)",
                    shard_name(index, &self.shards[index].address),
                    timeout.as_secs(),
                    field("cluster_state"),
                    field("cluster_known_nodes"),
                    field("cluster_slots_assigned"),
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Which shard owns each slot, from each shard's own line (`myself`) of `CLUSTER NODES`.
    fn read_slot_table(&mut self) -> Result<SlotTable, BenchError> {
        let count = self.shards.len();
        let mut owners: Vec<Option<usize>> = vec![None; usize::from(SLOTS)];
        let lines = self.each(|control, _| {
            let nodes: String = control.query(redis::cmd("CLUSTER").arg("NODES"))?;
            nodes
                .lines()
                .find(|line| {
                    line.split_whitespace()
                        .nth(2)
                        .is_some_and(|f| f.contains("myself"))
                })
                .map(str::to_string)
                .ok_or_else(|| BenchError::Protocol("CLUSTER NODES has no 'myself' line".into()))
        })?;
        for (index, line) in lines.iter().enumerate() {
            for (first, last) in owned_slots(line) {
                for slot in first..=last {
                    owners[usize::from(slot)] = Some(index);
                }
            }
        }
        SlotTable::from_owners(&owners, count).map_err(|slot| {
            BenchError::EngineStart(format!(
                "slot {slot} is owned by none of the {count} shards given: the cluster has nodes that were not given with --addr, give every one of them"
            ))
        })
    }
}

/// The IP and port a shard is met at: `CLUSTER MEET` takes an address, not a name.
fn meet_address(address: &EngineAddress) -> Result<(String, u16), BenchError> {
    use std::net::ToSocketAddrs;
    let resolved = (address.host.as_str(), address.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut all| all.next())
        .ok_or_else(|| BenchError::EngineUnreachable {
            address: address.to_string(),
            detail: "the host resolves to no address to CLUSTER MEET".into(),
        })?;
    Ok((resolved.ip().to_string(), resolved.port()))
}

/// The slot ranges a `CLUSTER NODES` line says its node owns (its fields past the eighth;
/// slots being migrated, in brackets, are left out).
pub fn owned_slots(line: &str) -> Vec<(u16, u16)> {
    line.split_whitespace()
        .skip(8)
        .filter(|f| !f.starts_with('['))
        .filter_map(|f| match f.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => f.parse().ok().map(|s| (s, s)),
        })
        .filter(|(a, b)| a <= b && *b < SLOTS)
        .collect()
}

/// Names the shard in an error about it, when there are several (one engine's errors are
/// left exactly as they were).
pub fn name_shard(
    count: usize,
    index: usize,
    address: &EngineAddress,
    e: BenchError,
) -> BenchError {
    if count <= 1 {
        return e;
    }
    let who = shard_name(index, address);
    match e {
        BenchError::EngineUnreachable { address, detail } => BenchError::EngineUnreachable {
            address,
            detail: format!("{who}: {detail}"),
        },
        BenchError::ConnectionLost { items_sent, detail } => BenchError::ConnectionLost {
            items_sent,
            detail: format!("{who}: {detail}"),
        },
        BenchError::EngineRejected { command, message } => BenchError::EngineRejected {
            command,
            message: format!("{message} ({who})"),
        },
        BenchError::Protocol(message) => BenchError::Protocol(format!("{who}: {message}")),
        BenchError::EngineStart(message) => BenchError::EngineStart(format!("{who}: {message}")),
        other => other,
    }
}

/// used_memory and the rest summed over the shards; a figure some shard does not report is
/// left out, and so is the fragmentation ratio of several shards (rss over used of the sums
/// would hide one shard's). One shard's reading is returned as it is.
pub fn total_memory(readings: &[MemoryInfo]) -> MemoryInfo {
    if let [only] = readings {
        return only.clone();
    }
    MemoryInfo {
        used_memory: readings.iter().map(|m| m.used_memory).sum(),
        used_memory_rss: readings.iter().map(|m| m.used_memory_rss).sum(),
        used_memory_dataset: readings.iter().map(|m| m.used_memory_dataset).sum(),
        mem_fragmentation_ratio: None,
        allocator_frag_ratio: None,
        mem_allocator: readings
            .first()
            .map(|m| m.mem_allocator.clone())
            .unwrap_or_default(),
    }
}

impl ShardSet {
    /// HLEN of the hash `key`, asked of the shard that owns it.
    pub fn hlen(&mut self, key: &str) -> Result<u64, BenchError> {
        let owner = self.owner_of(key);
        self.shards[owner]
            .control
            .query(redis::cmd("HLEN").arg(key))
    }

    /// The control connection of the shard that owns `key`.
    pub fn control_of(&mut self, key: &str) -> &mut ControlConnection {
        let owner = self.owner_of(key);
        &mut self.shards[owner].control
    }

    fn owner_of(&self, key: &str) -> usize {
        self.table
            .as_ref()
            .map_or(0, |table| table.shard_of(key.as_bytes()))
    }
}

/// How a phase after the load (`client::phases::snapshot`, `churn`, `eviction`) talks to the engine:
/// the run's batch size, connect timeout and stop.
#[derive(Clone, Copy)]
pub struct Pacing<'a> {
    pub pipeline: u32,
    pub connect_timeout: Duration,
    pub stop: &'a crate::client::connection::stop_request::StopRequest,
}

/// Reads memory between a run's phases, once the phase's connections are gone (waiting until
/// the control connection is the engine's only client, and counting connections as at the
/// baseline): the measurement's own reading, handed to the phases after the load
/// (`client::phases::churn`, `client::phases::churn::defrag`). The `&str` names the reading for an error.
pub type ReadMemory<'a> =
    dyn FnMut(&mut ShardSet, &'static str) -> Result<MemoryInfo, BenchError> + 'a;

/// A failure of one of the load's connections: which shard, and what happened.
pub struct LoadFailure {
    pub shard: usize,
    pub error: io::Error,
}

/// The load's connections: one pipelined connection per shard, and the routing of a batch
/// over them. One engine gets every batch as it was encoded.
pub struct LoadConnections {
    connections: Vec<PipelinedConnection>,
    addresses: Vec<EngineAddress>,
    table: Option<SlotTable>,
    /// Each shard's part of the batch being sent.
    parts: Vec<CommandBuffer>,
}

impl LoadConnections {
    /// Opens a connection to every shard and authenticates it when there is a password.
    pub fn connect(shards: &ShardSet, timeout: Duration) -> Result<Self, BenchError> {
        let count = shards.len();
        let mut connections = Vec::with_capacity(count);
        for (index, shard) in shards.shards().iter().enumerate() {
            let address = &shard.address;
            let mut connection = PipelinedConnection::connect(&address.socket_addr(), timeout)
                .map_err(|e| {
                    name_shard(
                        count,
                        index,
                        address,
                        BenchError::EngineUnreachable {
                            address: address.to_string(),
                            detail: e.to_string(),
                        },
                    )
                })?;
            if let Some(password) = &address.password {
                let lost = |e: io::Error| {
                    name_shard(
                        count,
                        index,
                        address,
                        BenchError::ConnectionLost {
                            items_sent: 0,
                            detail: e.to_string(),
                        },
                    )
                };
                let mut buffer = CommandBuffer::with_capacity(64);
                buffer.array(2).bulk(b"AUTH").bulk(password.as_bytes());
                connection.send(&buffer).map_err(lost)?;
                let tally = connection.read_replies(1).map_err(lost)?;
                if let Some(reply) = tally.first_error {
                    return Err(BenchError::from_load_reply("AUTH", reply, 0, address));
                }
            }
            connections.push(connection);
        }
        Ok(Self {
            connections,
            addresses: shards.shards().iter().map(|s| s.address.clone()).collect(),
            table: shards.table().cloned(),
            // The per-shard buffers a batch is split into: none for one engine, which is sent
            // the batch as it is.
            parts: match shards.table() {
                Some(_) => vec![CommandBuffer::with_capacity(64 * 1024 / count.max(1)); count],
                None => Vec::new(),
            },
        })
    }

    /// Sends a batch of `replies` commands, each to the shard that owns its key, and writes
    /// how many replies each shard owes into `owed` (cleared first: the caller reuses the
    /// vectors of answered batches, so the load allocates none per batch).
    pub fn send(
        &mut self,
        batch: &CommandBuffer,
        replies: usize,
        owed: &mut Vec<usize>,
    ) -> Result<(), LoadFailure> {
        let Some(table) = &self.table else {
            self.connections[0]
                .send(batch)
                .map_err(|error| LoadFailure { shard: 0, error })?;
            owed.clear();
            owed.push(replies);
            return Ok(());
        };
        table.split(batch, &mut self.parts, owed);
        for (shard, (part, count)) in self.parts.iter().zip(owed.iter()).enumerate() {
            if *count > 0 {
                self.connections[shard]
                    .send(part)
                    .map_err(|error| LoadFailure { shard, error })?;
            }
        }
        Ok(())
    }

    /// Reads what each shard owes of a batch; the tally of them all, and the shard of its
    /// first error reply.
    pub fn read(&mut self, owed: &[usize]) -> Result<(ReplyTally, usize), LoadFailure> {
        let mut total = ReplyTally::default();
        let mut error_shard = 0;
        for (shard, count) in owed.iter().enumerate() {
            if *count == 0 {
                continue;
            }
            let tally = self.connections[shard]
                .read_replies(*count)
                .map_err(|error| LoadFailure { shard, error })?;
            total.integer_sum = total
                .integer_sum
                .checked_add(tally.integer_sum)
                .ok_or_else(|| LoadFailure {
                    shard,
                    error: io::Error::new(
                        io::ErrorKind::InvalidData,
                        "the engine's integer replies add up past 2^64",
                    ),
                })?;
            if total.first_error.is_none() && tally.first_error.is_some() {
                total.first_error = tally.first_error;
                error_shard = shard;
            }
        }
        Ok((total, error_shard))
    }

    pub fn address(&self, shard: usize) -> &EngineAddress {
        &self.addresses[shard]
    }

    pub fn shards(&self) -> usize {
        self.connections.len()
    }

    /// What a failure says: the I/O error, after the shard's name when there are several.
    pub fn describe(&self, failure: &LoadFailure) -> String {
        if self.connections.len() > 1 {
            format!(
                "{}: {}",
                shard_name(failure.shard, &self.addresses[failure.shard]),
                failure.error
            )
        } else {
            failure.error.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_addresses_of_one_node_are_refused_naming_it() {
        let parse = |a: &str| EngineAddress::parse(a, None).unwrap();
        let err = check_distinct(&[parse("127.0.0.1:7001"), parse("localhost:7001")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--addr 127.0.0.1:7001 and --addr localhost:7001 (the 1st and 2nd given) name the same node"),
            "{err}"
        );
        assert!(check_distinct(&[parse("127.0.0.1:7001"), parse("127.0.0.1:7002")]).is_ok());
    }

    #[test]
    fn a_nodes_line_gives_the_slots_its_node_owns() {
        let line = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 6000 [5461->-abc]";
        assert_eq!(owned_slots(line), vec![(0, 5460), (6000, 6000)]);
        let none = "e7d1 127.0.0.1:30002@40002 master - 0 0 2 connected";
        assert!(owned_slots(none).is_empty());
    }

    #[test]
    fn one_engine_keeps_its_errors_as_they_were_and_a_shard_is_named() {
        let address = EngineAddress::parse("127.0.0.1:7001", None).unwrap();
        let lost = || BenchError::ConnectionLost {
            items_sent: 5,
            detail: "the engine closed the connection".into(),
        };
        assert_eq!(
            name_shard(1, 0, &address, lost()).to_string(),
            lost().to_string()
        );
        let named = name_shard(3, 2, &address, lost()).to_string();
        assert!(named.contains("shard 2 (127.0.0.1:7001)"), "{named}");
    }

    #[test]
    fn more_shards_than_the_cap_are_refused() {
        assert!(check_shard_count(1).is_ok());
        assert!(check_shard_count(MAX_SHARDS).is_ok());
        let err = check_shard_count(MAX_SHARDS + 1).unwrap_err().to_string();
        assert!(err.contains("--addr") && err.contains("2 to 16"), "{err}");
    }
}
