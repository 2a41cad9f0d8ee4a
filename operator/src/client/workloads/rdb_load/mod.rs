//! The `rdb` workload: every key of an RDB file written into the engine under test with its
//! type, elements and TTL. The file is read twice: first without values ([`RdbLoad::scan`]),
//! to count what will be written (keys by database and type, the commands, the keys skipped
//! and why, the bytes of data) before anything is sent; then with values, once per type, in a
//! reader thread ([`encoder`]), whose commands the load pipelines like any workload's and
//! whose types' ends are where the load reads used_memory for bytes per key by type. Afterwards the
//! engine's counts by database and type must equal the scan's ([`RdbLoad::verify`]).
//!
//! TTLs keep their absolute moment (PEXPIREAT), so the time left at the load is the time
//! left in the data; keys already expired at the scan (or within [`EXPIRY_GUARD_MS`] of it)
//! are skipped and counted, as an engine loading the file drops expired keys. A stream keeps
//! its groups, consumers, pending entries (by consumer, with their delivery time and count)
//! and last id; hash fields keep their own expiries, and a stream its entries-added and
//! largest deleted id, on an engine whose commands take them ([`target`], measured before the
//! load). Module values, and what the engine cannot take, are counted and said.

pub mod commands;
pub mod download;
pub mod encoder;
pub mod target;
pub mod type_counts;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use commands::EXPIRY_GUARD_MS;
use commands::{
    Chunker, Disposition, PASS_ORDER, carried_field_ttls, commands_after_elements, disposition,
    type_name,
};
pub use target::RdbTarget;

use crate::crd::RdbWorkloadSpec;
use crate::error::BenchError;
use crate::rdb::{KeyKind, RdbError};

/// What the scan of a file found: what the load will write and what it will not.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdbScan {
    /// Keys to write, by database and type (`TYPE`'s names).
    pub keys: BTreeMap<u64, BTreeMap<String, u64>>,
    /// Commands the load sends (SELECTs included).
    pub commands: u64,
    /// Each type's keys and commands (its pass's SELECTs included), in the passes' order.
    pub passes: Vec<RdbPass>,
    /// Bytes of key names and elements to write.
    pub data_bytes: u64,
    /// Keys skipped as expired at the reference time (or within the guard after it).
    pub expired: u64,
    /// Module values skipped, by module type name.
    pub modules: BTreeMap<String, u64>,
    /// Streams with no entry and no group: nothing can recreate one but XADD and XDEL.
    pub empty_streams: u64,
    /// Hash fields with their own TTL, kept by HPEXPIREAT where the engine has it.
    pub field_ttls: u64,
    /// Dragonfly's hash fields and set members with their own TTL: written without it.
    #[serde(default)]
    pub element_ttls_dropped: u64,
    /// Stream consumer groups recreated (at their last-delivered id), their pending entries
    /// and consumers (each entry claimed for its consumer with its delivery time and count).
    pub groups: u64,
    pub pending_entries: u64,
    pub consumers: u64,
    /// Streams whose entries-added and largest deleted id the file keeps (XSETID's options).
    #[serde(default)]
    pub stream_counters: u64,
    /// Consumer groups whose entries-read the file keeps (XGROUP SETID's ENTRIESREAD).
    #[serde(default)]
    pub groups_entries_read: u64,
}

impl RdbScan {
    /// Keys the load writes.
    pub fn keys_written(&self) -> u64 {
        self.keys.values().flat_map(|t| t.values()).sum()
    }

    /// Keys written by type, over the databases.
    pub fn keys_by_type(&self) -> BTreeMap<String, u64> {
        let mut by_type = BTreeMap::new();
        for types in self.keys.values() {
            for (name, n) in types {
                *by_type.entry(name.clone()).or_default() += n;
            }
        }
        by_type
    }

    /// What the load leaves out of the file on an engine with `target`'s commands, in one
    /// line (empty when nothing).
    pub fn left_out(&self, target: &RdbTarget) -> String {
        let mut parts = Vec::new();
        if self.expired > 0 {
            parts.push(format!(
                "{} keys expired (or expiring within {} s) skipped",
                self.expired,
                EXPIRY_GUARD_MS / 1000
            ));
        }
        for (module, n) in &self.modules {
            parts.push(format!("{n} values of module type {module} skipped"));
        }
        if self.empty_streams > 0 {
            parts.push(format!(
                "{} empty streams without groups skipped",
                self.empty_streams
            ));
        }
        if self.field_ttls > 0 && !target.field_expiry {
            parts.push(format!(
                "{} hash fields written without their own TTL (the engine has no HPEXPIREAT: Redis 7.4+ and Valkey 9+ keep them)",
                self.field_ttls
            ));
        }
        if self.element_ttls_dropped > 0 {
            parts.push(format!(
                "{} Dragonfly hash fields and set members written without their own TTL",
                self.element_ttls_dropped
            ));
        }
        if self.stream_counters > 0 && !target.stream_counters {
            parts.push(format!(
                "{} streams' entries-added and largest deleted id not restored (the engine's XSETID takes neither ENTRIESADDED nor MAXDELETEDID), only their last id; their consumer groups' lag, which needs entries-added, is the engine's own estimate",
                self.stream_counters
            ));
        }
        if self.groups_entries_read > 0 && !target.group_entries_read {
            parts.push(format!(
                "{} consumer groups' entries-read not restored (the engine takes no XGROUP SETID ENTRIESREAD: its COMMAND INFO gives the subcommand no options, and a count set on a scratch stream did not read back): their entries-read and lag are the engine's own estimate",
                self.groups_entries_read
            ));
        }
        parts.join("; ")
    }
}

/// One pass of the load: the keys of one type.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdbPass {
    /// `TYPE`'s name.
    pub key_type: String,
    pub keys: u64,
    /// Commands whatever the engine, plus [`Self::field_ttls`] once the target takes them.
    pub commands: u64,
    /// Hash fields' own expiries: one HPEXPIREAT each on an engine that has it.
    #[serde(default)]
    pub field_ttls: u64,
    /// Consumer groups whose entries-read the file keeps: one XGROUP SETID each on an engine
    /// that takes its ENTRIESREAD.
    #[serde(default)]
    pub groups_entries_read: u64,
}

impl RdbPass {
    /// The pass's commands that only an engine with `target`'s commands is sent.
    fn for_target_only(&self, target: &RdbTarget) -> u64 {
        self.field_ttls * u64::from(target.field_expiry)
            + self.groups_entries_read * u64::from(target.group_entries_read)
    }
}

/// What the scan keeps of one type's keys to count its pass's SELECTs: the databases of its
/// keys, in file order.
#[derive(Default)]
struct PassTally {
    keys: u64,
    commands: u64,
    field_ttls: u64,
    groups_entries_read: u64,
    first_db: Option<u64>,
    last_db: u64,
    /// Changes of database between consecutive keys of the type.
    changes: u64,
}

/// Where a client pod finds `workload.rdb.persistentVolumeClaim`, mounted read-only.
pub const CLAIM_MOUNT_PATH: &str = "/var/lib/membench/rdb";

/// The workload: the file, the time its expiries are judged at, and its scan.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdbLoad {
    pub path: String,
    /// In a cluster, the PersistentVolumeClaim that holds the file: the client pod mounts it
    /// read-only at /var/lib/membench/rdb, and `path` is under that mount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// Unix milliseconds the expiries are judged at (the scan's time), the same for the scan
    /// and every repetition's load.
    pub reference_ms: i64,
    pub scan: RdbScan,
    /// What the engine's commands restore, once measured ([`RdbLoad::for_target`]); the
    /// scan's commands count the field expiries only then.
    #[serde(default)]
    pub target: Option<RdbTarget>,
    /// Why the last load stopped short, when its reader failed (the file changed after the
    /// scan): the load then sends PINGs for the commands left, and the verification reports
    /// this instead of a count.
    #[serde(skip)]
    pub failure: Arc<Mutex<Option<String>>>,
    /// The https URL the file comes from (`path` is then the fetched copy, once fetched).
    /// Never serialized: a presigned URL's query is a credential.
    #[serde(skip)]
    pub url: Option<String>,
    /// The directory of the URL's credentials (a mounted Secret in a client pod).
    #[serde(skip)]
    pub credentials: Option<String>,
}

impl PartialEq for RdbLoad {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
            && self.claim == other.claim
            && self.url == other.url
            && self.credentials == other.credentials
            && self.reference_ms == other.reference_ms
            && self.scan == other.scan
            && self.target == other.target
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl RdbLoad {
    /// Scans the file at `path`, judging expiries at the current time; a file that cannot be
    /// read is refused with its offset and what to do, under `field`.
    pub fn scan_for(path: &str, field: &str) -> Result<Self, BenchError> {
        Self::scan(path).map_err(|e| BenchError::InvalidArgument {
            field: field.to_string(),
            message: e.to_string(),
        })
    }

    /// The file at `path` inside PersistentVolumeClaim `claim`, not scanned: the operator
    /// cannot read it, the client pod that mounts the claim scans it
    /// ([`RdbLoad::scan_in_claim`]). `path` must stay inside the claim: relative, without
    /// `..`.
    pub fn in_claim(claim: &str, path: &str) -> Result<Self, BenchError> {
        let invalid = |message: String| BenchError::InvalidArgument {
            field: "spec.workload.rdb.path".into(),
            message,
        };
        if path.starts_with('/') {
            return Err(invalid(format!(
                "is {path:?}, an absolute path: with persistentVolumeClaim the path is inside the claim, relative to its root; write it without the leading / (for example backups/dump.rdb)"
            )));
        }
        if path.split('/').any(|part| part == "..") {
            return Err(invalid(format!(
                "is {path:?}: a path inside persistentVolumeClaim {claim} cannot leave it with ..; name the file from the claim's root"
            )));
        }
        Ok(Self {
            path: format!("{CLAIM_MOUNT_PATH}/{}", path.trim_start_matches("./")),
            claim: Some(claim.to_string()),
            reference_ms: 0,
            scan: RdbScan::default(),
            target: None,
            failure: Arc::default(),
            url: None,
            credentials: None,
        })
    }

    /// The file of `spec.workload.rdb`, checked: a path (scanned now), a path inside a claim
    /// or an https URL (each not scanned: the client pod reads it, or the run fetches it).
    pub fn of_spec(spec: &RdbWorkloadSpec) -> Result<Self, BenchError> {
        let invalid = |field: &str, message: String| BenchError::InvalidArgument {
            field: format!("spec.workload.rdb.{field}"),
            message,
        };
        let Some(url) = &spec.url else {
            if let Some(secret) = &spec.credentials_secret {
                return Err(invalid(
                    "credentialsSecret",
                    format!(
                        "names Secret {} without a url: the credentials are for a file fetched over https; set url, or remove credentialsSecret",
                        secret.name
                    ),
                ));
            }
            if spec.path.is_empty() {
                return Err(invalid(
                    "path",
                    "is not set: name the file with path (a file, or a file inside persistentVolumeClaim) or url (https)".into(),
                ));
            }
            return match &spec.persistent_volume_claim {
                // Read where the client pod mounts the claim, not here.
                Some(claim) => Self::in_claim(&claim.claim_name, &spec.path),
                None => Self::scan_for(&spec.path, "spec.workload.rdb.path"),
            };
        };
        if !spec.path.is_empty() {
            return Err(invalid(
                "url",
                format!(
                    "and path ({}) are both set: name the file one way, path or url",
                    spec.path
                ),
            ));
        }
        if let Some(claim) = &spec.persistent_volume_claim {
            return Err(invalid(
                "url",
                format!(
                    "is set with persistentVolumeClaim {}: a fetched file needs no claim; remove one of them",
                    claim.claim_name
                ),
            ));
        }
        download::check_url(url).map_err(|message| invalid("url", message))?;
        let credentials = spec
            .credentials_secret
            .as_ref()
            .map(|_| download::CREDENTIALS_MOUNT_PATH.to_string());
        Ok(Self::at_url(url, credentials))
    }

    /// The file at `url`, not fetched yet ([`RdbLoad::fetch`] fetches and scans it), with the
    /// credentials of the directory `credentials`.
    pub fn at_url(url: &str, credentials: Option<String>) -> Self {
        Self {
            path: String::new(),
            claim: None,
            reference_ms: 0,
            scan: RdbScan::default(),
            target: None,
            failure: Arc::default(),
            url: Some(url.to_string()),
            credentials,
        }
    }

    /// Fetches the file at `url` into the temporary directory and scans it; the copy is
    /// removed when the returned guard is dropped. A failure is refused under
    /// `spec.workload.rdb.url`, saying what to do.
    pub fn fetch(
        url: &str,
        credentials: Option<&str>,
    ) -> Result<(Self, download::Downloaded), BenchError> {
        let invalid = |message: String| BenchError::InvalidArgument {
            field: "spec.workload.rdb.url".into(),
            message,
        };
        let fetched = download::download_blocking(url, credentials.map(std::path::Path::new))
            .map_err(|failure| match failure.transient {
                true => BenchError::SourceUnavailable {
                    message: failure.message,
                },
                false => invalid(failure.message),
            })?;
        let copy = fetched.path.display().to_string();
        let shown = download::redacted(url);
        let mut load =
            Self::scan(&copy).map_err(|e| invalid(format!("{shown} (fetched to {copy}): {e}")))?;
        load.url = Some(url.to_string());
        load.credentials = credentials.map(str::to_string);
        Ok((load, fetched))
    }
}

/// The files a run fetches from URLs: each fetched and scanned once, however many engine
/// entries load it (`membench run`), and removed when this drops, as the run ends.
#[derive(Default)]
pub struct FetchedFiles {
    fetched: Vec<(RdbLoad, download::Downloaded)>,
}

impl FetchedFiles {
    /// `url`'s file ready to load: fetched (with `credentials`) and scanned the first time it
    /// is asked for, the same copy and scan after that.
    pub fn load(&mut self, url: &str, credentials: Option<&str>) -> Result<RdbLoad, BenchError> {
        let known =
            |l: &RdbLoad| l.url.as_deref() == Some(url) && l.credentials.as_deref() == credentials;
        let at = match self.fetched.iter().position(|(l, _)| known(l)) {
            Some(at) => at,
            None => {
                self.fetched.push(RdbLoad::fetch(url, credentials)?);
                self.fetched.len() - 1
            }
        };
        // Each entry's load keeps its own record of a read that failed.
        Ok(RdbLoad {
            failure: Arc::default(),
            ..self.fetched[at].0.clone()
        })
    }
}

impl RdbLoad {
    /// Whether the file at `url` is fetched: `path` is then its copy (removed by the guard
    /// [`RdbLoad::fetch`] returns, not by the load: reports keep clones of it).
    pub fn is_fetched(&self) -> bool {
        self.url.is_some() && !self.path.is_empty()
    }

    /// Where the file is, as messages say: the URL without its query, or the path (in its
    /// claim).
    pub fn place(&self) -> String {
        match (&self.url, &self.claim) {
            (Some(url), _) => download::redacted(url),
            (None, Some(claim)) => format!("{} in PersistentVolumeClaim {claim}", self.path),
            (None, None) => self.path.clone(),
        }
    }

    /// Scans the file at `path`, in PersistentVolumeClaim `claim` when it is one (mounted at
    /// [`CLAIM_MOUNT_PATH`]); a file that cannot be read is refused under `field`, naming the
    /// claim.
    pub fn scan_in_claim(path: &str, claim: Option<&str>, field: &str) -> Result<Self, BenchError> {
        let Some(claim) = claim else {
            return Self::scan_for(path, field);
        };
        let mut load = Self::scan(path).map_err(|e| BenchError::InvalidArgument {
            field: field.to_string(),
            message: format!(
                "{e} (in PersistentVolumeClaim {claim}, mounted read-only at {CLAIM_MOUNT_PATH}; the client runs as an unprivileged user, so the file must be readable by all)"
            ),
        })?;
        load.claim = Some(claim.to_string());
        Ok(load)
    }

    /// Scans the file at `path`, judging expiries at the current time.
    pub fn scan(path: &str) -> Result<Self, RdbError> {
        let reference_ms = now_ms();
        Ok(Self {
            path: path.to_string(),
            claim: None,
            reference_ms,
            scan: scan_file(path, reference_ms)?,
            target: None,
            failure: Arc::default(),
            url: None,
            credentials: None,
        })
    }

    /// The load for an engine with `target`'s commands: the passes' commands (and the total)
    /// then count one HPEXPIREAT per field expiry and one XGROUP SETID per group's
    /// entries-read where the engine takes them.
    pub fn for_target(&self, target: RdbTarget) -> Self {
        let mut load = self.clone();
        if let Some(before) = load.target.replace(target) {
            for pass in &mut load.scan.passes {
                pass.commands -= pass.for_target_only(&before);
            }
        }
        for pass in &mut load.scan.passes {
            pass.commands += pass.for_target_only(&target);
        }
        load.scan.commands = load.scan.passes.iter().map(|p| p.commands).sum();
        load
    }

    /// A generous guess of the data's size in an engine: its bytes, and 100 a key for the
    /// key's own structures (about what the published string runs measure above the data).
    pub fn estimated_bytes(&self) -> u64 {
        self.scan
            .data_bytes
            .saturating_add(self.scan.keys_written().saturating_mul(100))
    }

    /// Refuses, before anything is written, a file whose estimated data exceeds the engine's
    /// `maxmemory` (summed over `shards`), and a file with keys outside database 0 for a
    /// cluster (which has database 0 only).
    pub fn check_fits(&self, maxmemory: Option<u64>, shards: usize) -> Result<(), BenchError> {
        let refuse = |message: String| {
            Err(BenchError::InvalidArgument {
                field: "workload.rdb".into(),
                message,
            })
        };
        if shards > 1
            && let Some(db) = self.scan.keys.keys().find(|db| **db != 0)
        {
            return refuse(format!(
                "{} holds keys in database {db}, and a cluster has database 0 only: load it into one engine, or move the keys to database 0 first",
                self.path
            ));
        }
        let limit = maxmemory.unwrap_or(0).saturating_mul(shards as u64);
        let needs = self.estimated_bytes();
        if limit > 0 && needs > limit {
            let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
            return refuse(format!(
                "{}'s data needs about {:.1} MiB in the engine ({} keys: {:.1} MiB of names and elements, and 100 B a key), more than its maxmemory of {:.1} MiB: nothing was written; raise maxmemory (and the engine's memory limit) to at least {:.0} MiB, or load a smaller file",
                self.path,
                mib(needs),
                self.scan.keys_written(),
                mib(self.scan.data_bytes),
                mib(limit),
                mib(needs).ceil() + 1.0
            ));
        }
        Ok(())
    }

    /// The passes as the load's type readings take them: each type's keys and where its
    /// commands end.
    pub fn type_segments(&self) -> Vec<crate::client::workloads::profile_workload::TypeSegment> {
        let mut commands_end = 0;
        self.scan
            .passes
            .iter()
            .filter_map(|pass| {
                commands_end += pass.commands;
                Some(crate::client::workloads::profile_workload::TypeSegment {
                    key_type: crate::profile::model::KeyType::from_type_reply(&pass.key_type)?,
                    keys: pass.keys,
                    commands_end,
                })
            })
            .collect()
    }

    /// The file and, once scanned, its keys to write; a file in a claim names the claim (the
    /// operator describes it unscanned: the client pod reads it).
    pub fn describe(&self) -> String {
        let place = self.place();
        if (self.claim.is_some() || self.url.is_some()) && self.reference_ms == 0 {
            return format!("rdb {place}");
        }
        format!("rdb {place} ({} keys to write)", self.scan.keys_written())
    }

    /// Checks the engine's keys by database and type (`keys_by_type` of a database) against
    /// the scan's; the keys written.
    pub fn verify(
        &self,
        keys_by_type: &mut dyn FnMut(u64) -> Result<BTreeMap<String, u64>, BenchError>,
    ) -> Result<u64, BenchError> {
        if let Some(failure) = self.failure.lock().map(|f| f.clone()).unwrap_or_default() {
            return Err(BenchError::CountMismatch {
                message: format!("the load of {} stopped short: {failure}", self.place()),
            });
        }
        for (db, types) in &self.scan.keys {
            let found = keys_by_type(*db)?;
            let wanted: BTreeMap<String, u64> = types
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(t, n)| (t.clone(), *n))
                .collect();
            if found != wanted {
                return Err(BenchError::CountMismatch {
                    message: format!(
                        "database {db} holds keys by type {found:?}, but {} has {wanted:?} to write: the engine refused or dropped some (is its maxmemory too low, or did keys expire during the load?)",
                        self.place()
                    ),
                });
            }
        }
        Ok(self.scan.keys_written())
    }
}

/// Reads the file without values, counting as the load will write.
fn scan_file(path: &str, reference_ms: i64) -> Result<RdbScan, RdbError> {
    let mut reader = crate::rdb::open(std::path::Path::new(path))?;
    let mut scan = RdbScan::default();
    let mut tallies: BTreeMap<String, PassTally> = BTreeMap::new();
    loop {
        let mut chunker = Chunker::default();
        let mut bytes = 0u64;
        let Some(entry) = reader.next_key(&mut |kind, part, scalar| {
            chunker.begins_command(kind, part, scalar.length);
            bytes += scalar.length;
        })?
        else {
            break;
        };
        match disposition(Some(&entry.kind), entry.expire_at_ms, reference_ms) {
            Disposition::Expired => {
                scan.expired += 1;
                continue;
            }
            Disposition::Module(name) => {
                *scan.modules.entry(name).or_default() += 1;
                continue;
            }
            Disposition::Write => {}
        }
        let stream = entry.stream.clone().unwrap_or_default();
        if entry.kind == KeyKind::Stream && entry.elements == 0 && stream.groups == 0 {
            scan.empty_streams += 1;
            continue;
        }
        let tally = tallies
            .entry(type_name(&entry.kind).to_string())
            .or_default();
        tally.keys += 1;
        tally.commands += chunker.commands + commands_after_elements(&entry);
        tally.field_ttls += carried_field_ttls(&entry);
        tally.groups_entries_read += stream.groups_entries_read;
        match tally.first_db {
            None => tally.first_db = Some(entry.db),
            Some(_) if entry.db != tally.last_db => tally.changes += 1,
            Some(_) => {}
        }
        tally.last_db = entry.db;
        scan.data_bytes += bytes + entry.name.len() as u64;
        scan.field_ttls += carried_field_ttls(&entry);
        scan.element_ttls_dropped += entry.fields_with_ttl - carried_field_ttls(&entry);
        scan.stream_counters += u64::from(stream.counters.is_some());
        scan.groups_entries_read += stream.groups_entries_read;
        scan.groups += stream.groups;
        scan.pending_entries += stream.pending;
        scan.consumers += stream.consumers;
        *scan
            .keys
            .entry(entry.db)
            .or_default()
            .entry(type_name(&entry.kind).to_string())
            .or_default() += 1;
    }
    // The passes in order, each connection starting on database 0 and each pass starting on
    // the database the one before it ended on.
    let mut db = 0;
    for kind in &PASS_ORDER {
        let Some(tally) = tallies.remove(type_name(kind)) else {
            continue;
        };
        let first = tally.first_db.unwrap_or(0);
        let selects = tally.changes + u64::from(first != db);
        db = tally.last_db;
        scan.passes.push(RdbPass {
            key_type: type_name(kind).to_string(),
            keys: tally.keys,
            commands: tally.commands + selects,
            field_ttls: tally.field_ttls,
            groups_entries_read: tally.groups_entries_read,
        });
    }
    scan.commands = scan.passes.iter().map(|p| p.commands).sum();
    Ok(scan)
}
