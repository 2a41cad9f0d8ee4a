//! Talking to an engine outside the load path: who it is (`INFO server`), what memory it
//! accounts (`INFO memory`), flushing, counting, and how it was configured.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};
use serde::{Deserialize, Serialize};

pub use crate::crd::EngineModule;
use crate::error::BenchError;

/// Where an engine listens and how to authenticate.
#[derive(Clone, Debug)]
pub struct EngineAddress {
    pub host: String,
    pub port: u16,
    pub password: Option<String>,
}

impl EngineAddress {
    /// Parses `HOST:PORT` (IPv6 as `[::1]:6379`).
    pub fn parse(addr: &str, password: Option<String>) -> Result<Self, BenchError> {
        let bad = || BenchError::InvalidArgument {
            field: "--addr".into(),
            message: format!("'{addr}' is not HOST:PORT (for example 127.0.0.1:6379)"),
        };
        let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || port == 0 {
            return Err(bad());
        }
        Ok(Self {
            host: host.to_string(),
            port,
            password,
        })
    }

    /// `host:port`, with brackets around an IPv6 host.
    pub fn socket_addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for EngineAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.socket_addr())
    }
}

/// Who the engine says it is, and how it was started.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct EngineInfo {
    /// `redis`, `valkey` or `dragonfly`, from the engine's own version field.
    pub name: String,
    /// The engine's own version (`valkey_version` for Valkey, which also reports a
    /// compatibility `redis_version`).
    pub version: String,
    /// `mem_allocator` from `INFO memory`; empty, and left out of JSON, when INFO has none
    /// (Dragonfly, which uses its own mimalloc).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub allocator: String,
    /// A library preloaded into the server by the local runner (`LD_PRELOAD`). INFO still names
    /// the allocator the server was built with, so this is the only record of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ld_preload: Option<String>,
    /// The server program the local runner started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    /// The engine store build the local runner started (`membench engines` lists them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// The emulator the local runner ran the server under (`qemu-aarch64-static`), when it is
    /// built for another architecture than the machine's. Its rates are the emulator's: never
    /// compare them with native ones (memory figures are the architecture's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<String>,
    /// CPU architecture, from the last word of `os` in `INFO server` (`x86_64`, `aarch64`).
    pub arch: String,
    /// `os` from `INFO server`.
    pub os: String,
    /// The RDB save schedule (`CONFIG GET save`); empty means snapshots are off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save: Option<String>,
    /// Whether the append-only file is on (`CONFIG GET appendonly`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub appendonly: Option<bool>,
    /// `maxmemory` in bytes; 0 means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxmemory: Option<u64>,
    /// `multiplexing_api` from `INFO server`: the event loop the server runs on (`epoll`;
    /// Dragonfly `iouring`, or `epoll` where a seccomp profile such as containerd's
    /// `RuntimeDefault` blocks the `io_uring_*` system calls and it falls back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiplexing_api: Option<String>,
    /// `thread_count` from `INFO server`, which Dragonfly reports (a keyspace table per
    /// thread, which the capacity projection needs); Redis and Valkey do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// The settings the spec changed (`engines[].config`, and allowlisted `args`), as the
    /// engine reports them with `CONFIG GET` after it started: the effective value, in the
    /// engine's own form (`8gb` reads back as `8589934592`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, String>,
    /// Settings asked for that `CONFIG GET` does not report: Dragonfly answers it for some of
    /// its flags only (`maxmemory`, the heartbeat eviction ones), so the others were passed as
    /// the spec gave them but cannot be read back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_unreported: Vec<String>,
    /// The modules the engine loaded (`INFO modules`: name and version), by name. Redis 8
    /// lists its built-in `vectorset`, Valkey 9.1 `lua`, Dragonfly `ReJSON` and `search`; an
    /// empty list when it loaded none (Redis 7, Valkey 9.0), absent when the engine's answer
    /// could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules: Option<Vec<EngineModule>>,
    /// `CLUSTER INFO` of a cluster-mode engine, read once the client made the cluster (shard
    /// 0's for a sharded one); absent for a standalone engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::crd::ClusterNodeState>,
    /// `process_id` from `INFO server`: the engine's process, which a peak phase reads the
    /// memory of when it runs on the same machine (`client::measurement::process_tree`). Not reported.
    #[serde(skip)]
    pub process_id: Option<u32>,
}

impl EngineInfo {
    /// The allocator as a reader should see it: what INFO says, plus a preloaded one.
    pub fn allocator_label(&self) -> String {
        if self.allocator.is_empty() && self.ld_preload.is_none() {
            return "(not reported)".to_string();
        }
        match &self.ld_preload {
            Some(lib) if lib.contains("jemalloc") => {
                format!("jemalloc (preloaded; INFO: {})", self.allocator)
            }
            Some(lib) => format!("{} (preloaded {lib})", self.allocator),
            None => self.allocator.clone(),
        }
    }

    /// Warnings about a configuration that differs from the published method.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.save.as_deref().is_some_and(|s| !s.trim().is_empty()) {
            warnings.push(format!(
                "RDB snapshots are on (save '{}'): a snapshot forks the server mid-load and skews memory; the published runs used --save ''",
                self.save.as_deref().unwrap_or_default()
            ));
        }
        if self.appendonly == Some(true) {
            warnings.push(
                "the append-only file is on: the published runs used --appendonly no".to_string(),
            );
        }
        warnings
    }
}

/// The memory accounting of `INFO memory`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MemoryInfo {
    pub used_memory: u64,
    pub used_memory_rss: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_memory_dataset: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_fragmentation_ratio: Option<f64>,
    /// jemalloc's own fragmentation (`allocator_frag_ratio`: active over allocated pages'
    /// bytes), which Redis and Valkey report and Dragonfly does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_frag_ratio: Option<f64>,
    pub mem_allocator: String,
}

/// The most of an INFO reply that is read: Redis's whole `INFO everything` is tens of KiB.
pub const MAX_INFO_BYTES: usize = 1 << 20;
/// The most fields kept from one INFO reply.
pub const MAX_INFO_FIELDS: usize = 4096;
/// The longest field name kept; longer ones are skipped.
const MAX_INFO_NAME: usize = 128;
/// The longest value kept; longer ones are skipped.
const MAX_INFO_VALUE: usize = 4096;

/// Splits INFO output into its `field:value` pairs. Whatever the engine sends, the result is
/// bounded: only the first [`MAX_INFO_BYTES`] are read, at most [`MAX_INFO_FIELDS`] fields
/// kept, and a field whose name or value is longer than any engine writes is skipped.
pub fn parse_info(text: &str) -> HashMap<String, String> {
    let mut end = text.len().min(MAX_INFO_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end]
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
        .filter(|(k, v)| !k.is_empty() && k.len() <= MAX_INFO_NAME && v.len() <= MAX_INFO_VALUE)
        .take(MAX_INFO_FIELDS)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl MemoryInfo {
    pub fn from_info(fields: &HashMap<String, String>) -> Result<Self, BenchError> {
        let number = |name: &str| -> Result<u64, BenchError> {
            fields
                .get(name)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| BenchError::Protocol(format!("INFO memory has no numeric '{name}'")))
        };
        Ok(Self {
            used_memory: number("used_memory")?,
            used_memory_rss: number("used_memory_rss")?,
            used_memory_dataset: fields
                .get("used_memory_dataset")
                .and_then(|v| v.parse().ok()),
            mem_fragmentation_ratio: fields
                .get("mem_fragmentation_ratio")
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|ratio| ratio.is_finite()),
            allocator_frag_ratio: fields
                .get("allocator_frag_ratio")
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|ratio| ratio.is_finite()),
            mem_allocator: fields.get("mem_allocator").cloned().unwrap_or_default(),
        })
    }
}

/// Names the engine from `INFO server`: its own version field first, since Valkey also
/// reports `redis_version:7.2.4` for compatibility.
pub fn identify(server: &HashMap<String, String>) -> (String, String) {
    if let Some(v) = server.get("dragonfly_version") {
        let v = v.trim_start_matches("df-").trim_start_matches('v');
        return ("dragonfly".into(), v.to_string());
    }
    if let Some(v) = server.get("valkey_version") {
        return ("valkey".into(), v.clone());
    }
    if server.get("server_name").is_some_and(|n| n == "valkey") {
        let v = server.get("redis_version").cloned().unwrap_or_default();
        return ("valkey".into(), v);
    }
    let v = server.get("redis_version").cloned().unwrap_or_default();
    ("redis".into(), v)
}

/// The modules of an `INFO modules` reply: one per `module:name=N,ver=V,...` line, sorted by
/// name (Redis lists them in its module table's hash order, which differs from one start to the
/// next), so that two runs of one image record the same list. Several lines share the `module`
/// key, so this reads the text itself. A line without a name is skipped; one without a version
/// has an empty version.
pub fn parse_modules(text: &str) -> Vec<EngineModule> {
    let mut modules: Vec<EngineModule> = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix("module:"))
        .filter_map(|fields| {
            // `usedby=[a|b]` and `options=[...]` separate their items with `|`, so a comma
            // always ends a field.
            let field = |key: &str| {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
                    .map(str::to_string)
            };
            let name = field("name").filter(|n| !n.is_empty())?;
            Some(EngineModule {
                name,
                version: field("ver").unwrap_or_default(),
            })
        })
        .collect();
    modules.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.version.cmp(&b.version)));
    modules
}

/// The keys INFO keyspace counts, over its `db<N>:keys=K,expires=...` lines.
pub fn keys_in_keyspace(keyspace: &HashMap<String, String>) -> u64 {
    keyspace_sum(keyspace, "keys=")
}

/// Keys with an expiry in every database (`expires=` of `INFO keyspace`).
pub fn keys_with_expiry_in_keyspace(keyspace: &HashMap<String, String>) -> u64 {
    keyspace_sum(keyspace, "expires=")
}

/// The sum over the databases of one `INFO keyspace` field (`keys=`, `expires=`).
fn keyspace_sum(keyspace: &HashMap<String, String>, field: &str) -> u64 {
    keyspace
        .iter()
        .filter(|(db, _)| db.starts_with("db"))
        .filter_map(|(_, fields)| {
            fields
                .split(',')
                .find_map(|f| f.strip_prefix(field))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .fold(0, u64::saturating_add)
}

/// Whether an error reply says the engine does not know the command (`ERR unknown command`),
/// as opposed to refusing it for another reason.
/// What `CLIENT INFO` says of the connection that asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnClient {
    pub id: u64,
    pub memory: u64,
}

impl OwnClient {
    /// The `id` and `tot-mem` of a `CLIENT INFO` line; None without them (Dragonfly).
    fn parse(line: &str) -> Option<Self> {
        Some(Self {
            id: client_list_field(line, "id")?,
            memory: client_list_field(line, "tot-mem")?,
        })
    }
}

/// What an engine holds for membench's own control connection and for every other one
/// (`tot-mem`), read with `INFO memory` (`ControlConnection::memory_and_connections`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeldForConnections {
    pub own: u64,
    pub others: u64,
}

/// A numeric field (`name=value`) of a `CLIENT LIST` line.
pub fn client_list_field(line: &str, name: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|field| field.strip_prefix(name)?.strip_prefix('='))
        .and_then(|value| value.parse().ok())
}

pub fn is_unknown_command(message: &str) -> bool {
    message.to_ascii_lowercase().contains("unknown command")
}

/// The control connection: everything but the load itself.
pub struct ControlConnection {
    connection: redis::Connection,
    address: EngineAddress,
}

impl ControlConnection {
    pub fn open(address: &EngineAddress, timeout: Duration) -> Result<Self, BenchError> {
        let mut redis_settings = RedisConnectionInfo::default().set_skip_set_lib_name();
        if let Some(password) = &address.password {
            redis_settings = redis_settings.set_password(password);
        }
        let info: ConnectionInfo = ConnectionAddr::Tcp(address.host.clone(), address.port)
            .into_connection_info()
            .map_err(|e| BenchError::from_redis(address, e))?
            .set_redis_settings(redis_settings);
        let client = redis::Client::open(info).map_err(|e| BenchError::from_redis(address, e))?;
        let connection = client
            .get_connection_with_timeout(timeout)
            .map_err(|e| BenchError::from_redis(address, e))?;
        connection
            .set_read_timeout(Some(Duration::from_secs(300)))
            .map_err(|e| BenchError::from_redis(address, e))?;
        let mut control = Self {
            connection,
            address: address.clone(),
        };
        // PING first: an engine that wants a password answers NOAUTH here, not on connect.
        control.query::<String>(&mut redis::cmd("PING"))?;
        Ok(control)
    }

    /// How long a reply may take on this connection (300 s from `open`).
    pub fn set_read_timeout(&mut self, timeout: Duration) -> Result<(), BenchError> {
        self.connection
            .set_read_timeout(Some(timeout))
            .map_err(|e| BenchError::from_redis(&self.address, e))
    }

    pub(crate) fn query<T: redis::FromRedisValue>(
        &mut self,
        cmd: &mut redis::Cmd,
    ) -> Result<T, BenchError> {
        cmd.query(&mut self.connection)
            .map_err(|e| BenchError::from_redis(&self.address, e))
    }

    /// A command whose error the caller classifies itself (the profiler tells a command the
    /// server's ACL refuses from one it does not know, and both from the server going away).
    pub fn query_unclassified<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
    ) -> redis::RedisResult<T> {
        cmd.query(&mut self.connection)
    }

    pub fn address(&self) -> &EngineAddress {
        &self.address
    }

    pub fn info(&mut self, section: &str) -> Result<HashMap<String, String>, BenchError> {
        let text: String = self.query(redis::cmd("INFO").arg(section))?;
        Ok(parse_info(&text))
    }

    pub fn memory(&mut self) -> Result<MemoryInfo, BenchError> {
        MemoryInfo::from_info(&self.info("memory")?)
    }

    pub fn dbsize(&mut self) -> Result<u64, BenchError> {
        self.query(&mut redis::cmd("DBSIZE"))
    }

    /// Keys in every database (INFO keyspace), since FLUSHALL empties them all and DBSIZE counts
    /// the selected one only.
    pub fn keys_in_all_databases(&mut self) -> Result<u64, BenchError> {
        Ok(keys_in_keyspace(&self.info("keyspace")?))
    }

    /// Keys with a TTL in every database (INFO keyspace `expires=`).
    pub fn keys_with_expiry(&mut self) -> Result<u64, BenchError> {
        Ok(keys_with_expiry_in_keyspace(&self.info("keyspace")?))
    }

    pub fn zcard(&mut self, key: &str) -> Result<u64, BenchError> {
        self.query(redis::cmd("ZCARD").arg(key))
    }

    /// `OBJECT ENCODING` of a key; None when the engine has no such command (Dragonfly).
    pub fn object_encoding(&mut self, key: &str) -> Result<Option<String>, BenchError> {
        match self.query(redis::cmd("OBJECT").arg("ENCODING").arg(key)) {
            Err(BenchError::EngineRejected { message, .. }) if is_unknown_command(&message) => {
                Ok(None)
            }
            other => other,
        }
    }

    /// This connection's id and what the engine holds for it right now (`CLIENT INFO`, Redis
    /// 6.2 and later: `tot-mem` is its query and output buffers and argument vectors, computed
    /// when asked). `None` where the engine answers no such figure (Dragonfly).
    pub fn own_client(&mut self) -> Option<OwnClient> {
        let line: String = self
            .query_unclassified(redis::cmd("CLIENT").arg("INFO"))
            .ok()?;
        OwnClient::parse(&line)
    }

    /// `INFO memory` with what the engine holds right now for this connection and for all the
    /// others (`tot-mem` of `CLIENT INFO` and `CLIENT LIST`; 0 and 0 where the engine reports
    /// no such figure). The three go as one pipeline, which the engine answers in one pass
    /// over this connection's input, so that its cron cannot run between them: the cron
    /// shrinks an idle connection's 16 KiB reply buffer (by 14,592 B on Valkey 9.1), and asked
    /// one after the other, a shrink between the client list and `INFO` moved a reading by
    /// that much (seen a few times in 25 runs of client_workloads on a busy machine).
    pub fn memory_and_connections(
        &mut self,
    ) -> Result<(MemoryInfo, HeldForConnections), BenchError> {
        let replies: Vec<redis::RedisResult<String>> = redis::pipe()
            .cmd("CLIENT")
            .arg("INFO")
            .cmd("CLIENT")
            .arg("LIST")
            .cmd("INFO")
            .arg("memory")
            .ignore_errors()
            .query(&mut self.connection)
            .map_err(|e| BenchError::from_redis(&self.address, e))?;
        let [own, list, info]: [_; 3] = replies.try_into().map_err(|_| {
            BenchError::Protocol(
                "the engine answered CLIENT INFO, CLIENT LIST and INFO memory with other than three replies"
                    .into(),
            )
        })?;
        let memory = MemoryInfo::from_info(&parse_info(
            &info.map_err(|e| BenchError::from_redis(&self.address, e))?,
        ))?;
        let own = own.ok().as_deref().and_then(OwnClient::parse);
        let held = match (own, list) {
            (None, _) => HeldForConnections::default(),
            (Some(own), Err(_)) => HeldForConnections {
                own: own.memory,
                others: 0,
            },
            (Some(own), Ok(list)) => HeldForConnections {
                own: own.memory,
                others: list
                    .lines()
                    .filter(|line| client_list_field(line, "id") != Some(own.id))
                    .filter_map(|line| client_list_field(line, "tot-mem"))
                    .sum(),
            },
        };
        Ok((memory, held))
    }

    pub fn connected_clients(&mut self) -> Result<u64, BenchError> {
        let clients = self.info("clients")?;
        Ok(clients
            .get("connected_clients")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    /// Empties the server synchronously, so freed memory is back before the baseline is read.
    /// Engines that do not know `FLUSHALL SYNC` get a plain `FLUSHALL`, which is synchronous
    /// unless lazy freeing is configured.
    pub fn flush_all(&mut self) -> Result<(), BenchError> {
        match self.query::<String>(redis::cmd("FLUSHALL").arg("SYNC")) {
            Ok(_) => Ok(()),
            Err(BenchError::EngineRejected { .. }) => self
                .query::<String>(&mut redis::cmd("FLUSHALL"))
                .map(|_| ()),
            Err(e) => Err(e),
        }
    }

    fn config_get(&mut self, name: &str) -> Option<String> {
        let pairs: Vec<String> = self.query(redis::cmd("CONFIG").arg("GET").arg(name)).ok()?;
        // The pair of this very name (an alias may answer under its own), else the first.
        pairs
            .chunks(2)
            .find(|pair| pair[0].eq_ignore_ascii_case(name))
            .or_else(|| pairs.chunks(2).next())
            .and_then(|pair| pair.get(1).cloned())
    }

    /// Reads `names` back with `CONFIG GET` into `info.config`, and the names the engine does
    /// not report into `info.config_unreported`.
    pub fn read_config(&mut self, names: &[String], info: &mut EngineInfo) {
        for name in names {
            match self.config_get(name) {
                Some(value) => {
                    info.config.insert(name.clone(), value);
                }
                None => info.config_unreported.push(name.clone()),
            }
        }
    }

    /// Who the engine is and how it is configured.
    pub fn identify(&mut self) -> Result<EngineInfo, BenchError> {
        let server = self.info("server")?;
        let memory = self.info("memory")?;
        let (name, version) = identify(&server);
        let os = server.get("os").cloned().unwrap_or_default();
        let arch = os
            .split_whitespace()
            .last()
            .map(str::to_string)
            .or_else(|| server.get("arch_bits").map(|b| format!("{b}-bit")))
            .unwrap_or_default();
        Ok(EngineInfo {
            name,
            version,
            allocator: memory.get("mem_allocator").cloned().unwrap_or_default(),
            arch,
            os,
            save: self.config_get("save"),
            appendonly: self.config_get("appendonly").map(|v| v == "yes"),
            maxmemory: self.config_get("maxmemory").and_then(|v| v.parse().ok()),
            multiplexing_api: server
                .get("multiplexing_api")
                .filter(|api| !api.is_empty())
                .cloned(),
            threads: server.get("thread_count").and_then(|t| t.parse().ok()),
            modules: self.modules(),
            process_id: server.get("process_id").and_then(|p| p.parse().ok()),
            ..EngineInfo::default()
        })
    }

    /// The modules the engine loaded (`INFO modules`); None when it does not answer (the
    /// result then says nothing about modules rather than failing the run).
    pub fn modules(&mut self) -> Option<Vec<EngineModule>> {
        let text: String = self.query(redis::cmd("INFO").arg("modules")).ok()?;
        Some(parse_modules(&text))
    }

    /// The other clients connected to the engine, one short line each (address, name, age,
    /// idle time, last command), for an error that names them. Empty when the engine does not
    /// answer `CLIENT LIST`.
    pub fn other_clients(&mut self) -> Vec<String> {
        let own_id = self
            .query::<u64>(redis::cmd("CLIENT").arg("ID"))
            .map(|id| format!("id={id}"));
        let Ok(list) = self.query::<String>(redis::cmd("CLIENT").arg("LIST")) else {
            return Vec::new();
        };
        list.lines()
            .filter(|line| match &own_id {
                Ok(own) => !line.split_whitespace().any(|field| field == own),
                // Without CLIENT ID, this connection is the one running CLIENT LIST.
                Err(_) => !line.contains("cmd=client|list") && !line.contains("cmd=client "),
            })
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                line.split_whitespace()
                    .filter(|field| {
                        ["addr=", "name=", "age=", "idle=", "cmd="]
                            .iter()
                            .any(|key| field.starts_with(key))
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    /// Asks the server to exit without saving.
    pub fn shutdown(mut self) {
        // The server closes the connection instead of answering, so an error is expected.
        let _ = redis::cmd("SHUTDOWN")
            .arg("NOSAVE")
            .query::<()>(&mut self.connection);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valkey_is_named_by_its_own_version_not_the_compatibility_one() {
        let server = parse_info(
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n",
        );
        assert_eq!(
            identify(&server),
            ("valkey".to_string(), "9.1.2".to_string())
        );
    }

    #[test]
    fn a_client_list_line_gives_its_numeric_fields_by_name() {
        let line = "id=74 addr=127.0.0.1:35278 qbuf=0 qbuf-free=20474 omem=0 tot-mem=23168 \
                    events=r cmd=client|list";
        assert_eq!(client_list_field(line, "tot-mem"), Some(23168));
        assert_eq!(client_list_field(line, "qbuf-free"), Some(20474));
        assert_eq!(client_list_field(line, "qbuf"), Some(0));
        // `id` is not `idle`.
        assert_eq!(client_list_field("idle=9 id=74", "id"), Some(74));
        // Dragonfly's line has no tot-mem.
        assert_eq!(
            client_list_field("id=2 addr=127.0.0.1:1 tid=0", "tot-mem"),
            None
        );
    }

    #[test]
    fn redis_and_dragonfly_are_told_apart() {
        let redis = parse_info("redis_version:7.0.15\r\nos:Linux 6.1.0 x86_64\r\n");
        assert_eq!(
            identify(&redis),
            ("redis".to_string(), "7.0.15".to_string())
        );
        let dragonfly = parse_info("redis_version:7.4.0\r\ndragonfly_version:df-v1.34.1\r\n");
        assert_eq!(
            identify(&dragonfly),
            ("dragonfly".to_string(), "1.34.1".to_string())
        );
    }

    #[test]
    fn only_an_unknown_command_reply_counts_as_a_missing_command() {
        assert!(is_unknown_command(
            "An error was signalled by the server - ResponseError: unknown command `OBJECT`"
        ));
        assert!(is_unknown_command("ERR unknown command 'OBJECT'"));
        assert!(!is_unknown_command("WRONGTYPE Operation against a key"));
    }

    #[test]
    fn an_allocator_info_does_not_report_is_left_out_not_empty() {
        let dragonfly = EngineInfo {
            name: "dragonfly".into(),
            version: "1.40.0".into(),
            ..Default::default()
        };
        let json = serde_json::to_value(&dragonfly).unwrap();
        assert!(json.get("allocator").is_none(), "{json}");
        assert_eq!(dragonfly.allocator_label(), "(not reported)");
    }

    #[test]
    fn modules_are_read_from_every_module_line_sorted_by_name() {
        // Dragonfly 1.40's reply (two modules, `usedby`/`using` lists), Redis 8.2 with FalkorDB
        // loaded, and an engine that loaded none.
        let dragonfly = "# Modules\r\nmodule:name=ReJSON,ver=20000,api=1,filters=0,usedby=[search],using=[],options=[handle-io-errors]\r\nmodule:name=search,ver=20000,api=1,filters=0,usedby=[],using=[ReJSON],options=[handle-io-errors]\r\n";
        let module = |name: &str, version: &str| EngineModule {
            name: name.into(),
            version: version.into(),
        };
        assert_eq!(
            parse_modules(dragonfly),
            [module("ReJSON", "20000"), module("search", "20000")]
        );
        let falkordb = "# Modules\r\nmodule:name=vectorset,ver=1,api=1,filters=0,usedby=[],using=[],options=[handle-io-errors|handle-repl-async-load]\r\nmodule:name=graph,ver=41603,api=1,filters=0,usedby=[],using=[],options=[]\r\n";
        assert_eq!(
            parse_modules(falkordb),
            [module("graph", "41603"), module("vectorset", "1")]
        );
        assert_eq!(parse_modules("# Modules\r\n"), []);
        assert_eq!(parse_modules(""), []);
        // A line without a name is not a module; one without a version keeps its name.
        assert_eq!(
            parse_modules("module:ver=1\nmodule:name=x,api=1\nmodule:name=,ver=2\n"),
            [module("x", "")]
        );
    }

    #[test]
    fn the_keys_of_every_database_are_counted() {
        let info = parse_info(
            "# Keyspace\r\ndb0:keys=3,expires=1,avg_ttl=0\r\ndb5:keys=40,expires=0,avg_ttl=0\r\n",
        );
        assert_eq!(keys_in_keyspace(&info), 43);
        assert_eq!(keys_in_keyspace(&parse_info("# Keyspace\r\n")), 0);
    }

    #[test]
    fn parses_addresses_including_ipv6() {
        let a = EngineAddress::parse("[::1]:6380", None).unwrap();
        assert_eq!((a.host.as_str(), a.port), ("::1", 6380));
        assert_eq!(a.socket_addr(), "[::1]:6380");
        assert!(EngineAddress::parse("localhost", None).is_err());
        assert!(EngineAddress::parse("localhost:0", None).is_err());
    }

    #[test]
    fn memory_info_requires_the_used_memory_fields() {
        let fields = parse_info(
            "used_memory:1000\r\nused_memory_rss:4096\r\nmem_allocator:libc\r\nmem_fragmentation_ratio:4.10\r\n",
        );
        let memory = MemoryInfo::from_info(&fields).unwrap();
        assert_eq!(memory.used_memory, 1000);
        assert_eq!(memory.mem_fragmentation_ratio, Some(4.1));
        assert_eq!(memory.used_memory_dataset, None);
        assert!(MemoryInfo::from_info(&parse_info("used_memory_rss:1\r\n")).is_err());
    }

    #[test]
    fn info_parsing_is_bounded_whatever_the_engine_sends() {
        // Ten million fields, a name and a value longer than any engine writes.
        let mut text = format!(
            "{}:x\r\nused_memory:{}\r\n",
            "k".repeat(200),
            "9".repeat(5000)
        );
        for i in 0..10_000_000u32 {
            if text.len() > 2 * MAX_INFO_BYTES {
                break;
            }
            text.push_str(&format!("f{i}:{i}\r\n"));
        }
        let fields = parse_info(&text);
        assert!(fields.len() <= MAX_INFO_FIELDS, "{}", fields.len());
        assert!(
            !fields.contains_key("used_memory"),
            "an overlong value is skipped"
        );
        assert!(fields.keys().all(|k| k.len() <= 128));
        let past_the_end = format!("{}used_memory:5\r\n", "#".repeat(MAX_INFO_BYTES));
        assert!(parse_info(&past_the_end).is_empty());
    }

    #[test]
    fn memory_figures_that_overflow_or_are_not_finite_are_refused() {
        let fields = parse_info(
            "used_memory:18446744073709551616\r\nused_memory_rss:1\r\nmem_fragmentation_ratio:inf\r\n",
        );
        assert!(
            MemoryInfo::from_info(&fields).is_err(),
            "used_memory past 2^64"
        );
        let fields =
            parse_info("used_memory:1\r\nused_memory_rss:1\r\nmem_fragmentation_ratio:NaN\r\n");
        assert_eq!(
            MemoryInfo::from_info(&fields)
                .unwrap()
                .mem_fragmentation_ratio,
            None
        );
    }

    #[test]
    fn persistence_on_is_warned_about() {
        let info = EngineInfo {
            save: Some("3600 1 300 100".into()),
            appendonly: Some(true),
            ..Default::default()
        };
        assert_eq!(info.warnings().len(), 2);
        let off = EngineInfo {
            save: Some(String::new()),
            appendonly: Some(false),
            ..Default::default()
        };
        assert!(off.warnings().is_empty());
    }
}
