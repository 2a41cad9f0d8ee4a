//! `membench load`'s setting flags, and the run plan they make (`client::measurement::plan`): everything a
//! run does besides where the engines are and where its result goes. With `--plan`, the plan
//! is read whole instead, and none of these flags may be given.

use clap::{Args, ValueEnum};
use membench::client::measurement::plan::{RunPlan, RunSettings, WorkloadPlan};
use membench::client::phases::eviction::Eviction;
use membench::client::phases::replica::ReplicaRate;
use membench::client::phases::snapshot::Snapshot;
use membench::client::workloads::profile_workload::{
    PROFILE_DIGEST_ENV, PROFILE_ENV, ProfileWorkload, profile_digest,
};
use membench::client::workloads::rdb_load::{RdbLoad, download};
use membench::client::workloads::ttl::Ttl;
use membench::client::workloads::workload::Workload;
use membench::crd::RecordLayout;
use membench::profile::Profile;

use membench::stats::StabilityThresholds;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum WorkloadKind {
    SortedSet,
    RandomStrings,
    Strings,
    Records,
    /// A keyspace rebuilt from a profile (`membench profile`), with --profile FILE.
    Profile,
    /// Every key of an RDB file (a backup: Redis, Valkey or Dragonfly), with --rdb FILE.
    Rdb,
}

/// The flags that are settings of the run: each maps to a field of the plan
/// (`every_setting_flag_changes_its_field_of_the_plan` holds them to it).
#[derive(Args)]
pub struct SettingFlags {
    /// Which published workload to load.
    #[arg(long, value_enum, required_unless_present_any = ["plan", "plan_json"])]
    pub(super) workload: Option<WorkloadKind>,
    /// sorted-set: how many members to add to the one sorted set.
    #[arg(long)]
    pub(super) members: Option<u64>,
    /// sorted-set: the key of the sorted set.
    #[arg(long, default_value = "membench:zset")]
    pub(super) key: String,
    /// sorted-set: read used_memory every this many members (0: no growth curve).
    #[arg(long, default_value_t = 1_000_000)]
    pub(super) sample_every: u64,
    /// random-strings: how many SETs to send (valkey-benchmark -n).
    #[arg(long)]
    pub(super) requests: Option<u64>,
    /// random-strings: the key space the keys are drawn from (valkey-benchmark -r).
    #[arg(long)]
    pub(super) keyspace: Option<u64>,
    /// random-strings and profile: seed of the generator (a profile's rebuild is the same data
    /// for the same seed, on every engine).
    #[arg(long, default_value_t = membench::crd::default_seed())]
    pub(super) seed: u64,
    /// profile: store this many times the profile's keys.
    #[arg(long)]
    pub(super) scale: Option<f64>,
    /// profile: grow the element counts of hashes, sets, sorted sets, lists and streams by
    /// this factor (for data that grows inside its keys).
    #[arg(long)]
    pub(super) element_scale: Option<f64>,
    /// rdb: the RDB file whose keys are written, with their types, elements and TTLs (keys
    /// already expired, module values and empty streams are skipped and counted); a path, or
    /// an https URL (fetched into TMPDIR first, then removed).
    #[arg(long, value_name = "FILE|URL")]
    pub(super) rdb: Option<std::path::PathBuf>,
    /// rdb with an https URL: a directory of credentials, one file a key as a mounted Secret
    /// holds them: username and password, or token, and ca.crt (a PEM CA for the server).
    #[arg(long, value_name = "DIR")]
    pub(super) rdb_credentials: Option<std::path::PathBuf>,
    /// strings: how many distinct keys to store.
    #[arg(long)]
    pub(super) keys: Option<u64>,
    /// random-strings and strings: value size in bytes (default 16 for random-strings, 100 for
    /// strings, as published).
    #[arg(long)]
    pub(super) value_size: Option<u32>,
    /// records: how many records to store.
    #[arg(long)]
    pub(super) records: Option<u64>,
    /// records: one hash per record, or one string key per field.
    #[arg(long, value_enum, default_value = "hash")]
    pub(super) layout: LayoutArg,
    /// records: the field names of a record, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "name,age,city,score")]
    pub(super) fields: Vec<String>,
    /// Empty a server that already holds keys (FLUSHALL: every database) before measuring.
    /// Without it, a server that is not empty is refused (exit 2), naming how many keys it
    /// holds: a benchmark starts each repetition with FLUSHALL.
    #[arg(long)]
    pub(super) flush: bool,
    /// Give items a TTL of this many seconds, set with the write (SET ... EX, EXPIRE after HSET
    /// and after the sorted set's first ZADD); at least 60 more than --settle-seconds.
    #[arg(long, value_name = "SECONDS")]
    pub(super) ttl_seconds: Option<u32>,
    /// The share of items that get the TTL, above 0 and at most 1 (default 1 with
    /// --ttl-seconds), spread evenly.
    #[arg(long, value_name = "SHARE")]
    pub(super) ttl_share: Option<f64>,
    /// After each repetition's readings, this many rounds of deletes and overwrites on the
    /// loaded data, each followed by a memory reading (strings, records and sorted-set).
    #[arg(long, value_name = "N")]
    pub(super) churn_rounds: Option<u32>,
    /// The share of the items still held that each churn round deletes, above 0 and below 1.
    #[arg(long, value_name = "SHARE")]
    pub(super) delete_share: Option<f64>,
    /// The share of the items a churn round left that it overwrites, above 0 and at most 1.
    #[arg(long, value_name = "SHARE")]
    pub(super) overwrite_share: Option<f64>,
    /// The size in bytes of the values a churn overwrite writes.
    #[arg(long, value_name = "BYTES")]
    pub(super) overwrite_value_size: Option<u32>,
    /// After the churn rounds (and --settle-seconds), switch active defragmentation on and
    /// follow it until RSS stops falling (refused on a build that cannot defragment). Dragonfly
    /// has no switch: its maxmemory is lowered for the window, and it must run with
    /// --mem_defrag_check_sec_interval=1 (60 s by default, past the window).
    #[arg(long)]
    pub(super) defrag: bool,
    /// The longest defragmentation window, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = membench::crd::default_defrag_seconds())]
    pub(super) defrag_seconds: u32,
    /// The seed of the churn's draws (which items each round deletes and overwrites).
    #[arg(long, value_name = "SEED", default_value_t = membench::crd::default_churn_seed())]
    pub(super) churn_seed: u64,
    /// After each repetition's readings, save a snapshot (BGSAVE) while overwriting loaded
    /// keys at this many writes per second, and measure the peak: the engine's process tree's
    /// Pss when it runs on this machine, the copy-on-write it reports, the save's duration and
    /// the writes' latency (strings, records). Writes the server's snapshot file (the new
    /// files of a Dragonfly on this machine are removed after each save).
    #[arg(long, value_name = "N")]
    pub(super) snapshot_writes_per_sec: Option<u32>,
    /// The share of the loaded items those writes are spread over (default 1).
    #[arg(long, value_name = "SHARE")]
    pub(super) snapshot_write_share: Option<f64>,
    /// The overwrites per second during the replica's sync, over every loaded key.
    #[arg(long, value_name = "N", requires = "replica")]
    pub(super) replica_writes_per_sec: Option<u32>,
    /// After each repetition's other phases, empty the engine, give it this maxmemory (100mb,
    /// 2gb, bytes) and load the workload past it (strings, records).
    #[arg(long, value_name = "SIZE")]
    pub(super) maxmemory: Option<String>,
    /// The maxmemory-policy of that load (default allkeys-lru).
    #[arg(long, value_name = "POLICY")]
    pub(super) maxmemory_policy: Option<String>,
    /// How much that load writes, as a multiple of maxmemory (default 3).
    #[arg(long, value_name = "MULTIPLE")]
    pub(super) load_to: Option<f64>,
    /// Make the engine, a cluster-mode node that owns no slots, a one-node cluster owning all
    /// 16384 slots (CLUSTER ADDSLOTSRANGE) before the first baseline. With several --addr, the
    /// shards are joined whether it is given or not.
    #[arg(long)]
    pub(super) own_all_slots: bool,
    /// Engine settings to read back with CONFIG GET into the result's engine.config, comma
    /// separated (the settings a spec's engines[].config changed, which a run plan carries). A
    /// setting the engine does not report lands in engine.config_unreported.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub(super) read_config: Vec<String>,
    /// Commands per batch, on the one connection: each batch is sent whole and its replies
    /// read whole. With several --addr (shards), a batch is split over the shards'
    /// connections by the owner of each command's key.
    #[arg(long, default_value_t = membench::crd::default_pipeline())]
    pub(super) pipeline: u32,
    /// Batches sent before the first one's replies are read: 1 keeps at most --pipeline
    /// commands unanswered, like `redis-benchmark -P`; more send the next batches while the
    /// engine works on the first (never more than 64 KiB of commands in flight, and a larger
    /// batch goes alone).
    #[arg(long, default_value_t = 8)]
    pub(super) batches_in_flight: u32,
    /// How many times to load the workload, flushing in between.
    #[arg(long, default_value_t = 10)]
    pub(super) repetitions: u32,
    /// Seconds to wait after each load before a second memory reading (0: none).
    #[arg(long, default_value_t = 0)]
    pub(super) settle_seconds: u32,
    /// Seconds to wait for the engine's other clients to disconnect before each baseline and
    /// final memory reading (their buffers would count as data); a client still connected
    /// then fails the repetition, naming it.
    #[arg(long, value_name = "SECONDS", default_value_t = membench::client::measurement::measure::DEFAULT_OTHER_CLIENTS_TIMEOUT.as_secs())]
    pub(super) other_clients_timeout: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum LayoutArg {
    Hash,
    Strings,
}

/// Says which flag a workload needs when it is missing, and refuses a count of zero as a
/// spec does, in the same words.
fn required(value: Option<u64>, flag: &str, workload: &str) -> Result<u64, String> {
    match value {
        None => Err(format!("--workload {workload} needs {flag} N")),
        Some(0) => Err(format!(
            "invalid {flag}: {}",
            membench::client::workloads::workload::AT_LEAST_ONE
        )),
        Some(n) => Ok(n),
    }
}

impl SettingFlags {
    /// The churn the flags ask for: none without --churn-rounds, whose companions are refused
    /// alone.
    fn churn(&self) -> Result<Option<membench::client::phases::churn::Churn>, String> {
        let Some(rounds) = self.churn_rounds else {
            let stray = [
                ("--delete-share", self.delete_share.is_some()),
                ("--overwrite-share", self.overwrite_share.is_some()),
                (
                    "--overwrite-value-size",
                    self.overwrite_value_size.is_some(),
                ),
                ("--defrag", self.defrag),
            ];
            return match stray.iter().find(|(_, set)| *set) {
                Some((flag, _)) => Err(format!(
                    "{flag} applies only with --churn-rounds N: add it, or remove {flag}"
                )),
                None => Ok(None),
            };
        };
        let spec = membench::crd::ChurnSpec {
            rounds,
            delete_share: self.delete_share,
            overwrite_share: self.overwrite_share,
            overwrite_value_size: self.overwrite_value_size,
            defrag: self.defrag,
            defrag_seconds: self.defrag_seconds,
            seed: self.churn_seed,
        };
        let flag = |name: &str| {
            match name {
                "rounds" => "--churn-rounds",
                "deleteShare" => "--delete-share",
                "overwriteShare" => "--overwrite-share",
                "overwriteValueSize" => "--overwrite-value-size",
                "defragSeconds" => "--defrag-seconds",
                _ => "--churn-rounds",
            }
            .to_string()
        };
        membench::client::phases::churn::Churn::checked(&spec, &flag)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    /// The load past maxmemory the flags ask for: none without --maxmemory, whose companions
    /// are refused alone.
    fn eviction(&self) -> Result<Option<Eviction>, String> {
        let Some(maxmemory) = &self.maxmemory else {
            return match (&self.maxmemory_policy, self.load_to) {
                (Some(_), _) => Err("--maxmemory-policy applies only with --maxmemory SIZE: add it, or remove --maxmemory-policy".into()),
                (_, Some(_)) => Err("--load-to applies only with --maxmemory SIZE: add it, or remove --load-to".into()),
                _ => Ok(None),
            };
        };
        let spec = membench::crd::EvictionSpec {
            maxmemory: Some(maxmemory.clone()),
            policy: self.maxmemory_policy.clone(),
            load_to: self.load_to.unwrap_or_else(membench::crd::default_load_to),
        };
        let flag = |name: &str| {
            match name {
                "policy" => "--maxmemory-policy",
                "loadTo" => "--load-to",
                _ => "--maxmemory",
            }
            .to_string()
        };
        Eviction::checked(&spec, &flag)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    /// The workload the flags ask for, checked; a profile's read from `profile_file` (or
    /// `$MEMBENCH_PROFILE`).
    fn workload(&self, profile_file: Option<&std::path::Path>) -> Result<Workload, String> {
        let Some(kind) = self.workload else {
            return Err(
                "--workload is missing: name the workload to load, or give a --plan".into(),
            );
        };
        let stray = |flags: &[(&str, bool)]| -> Result<(), String> {
            match flags.iter().find(|(_, set)| *set) {
                Some((flag, _)) => Err(format!(
                    "{flag} does not apply to --workload {}",
                    kind.to_possible_value().unwrap().get_name()
                )),
                None => Ok(()),
            }
        };
        if kind != WorkloadKind::Profile {
            stray(&[
                ("--profile", profile_file.is_some()),
                ("--scale", self.scale.is_some()),
                ("--element-scale", self.element_scale.is_some()),
            ])?;
        }
        if kind != WorkloadKind::Rdb {
            stray(&[("--rdb", self.rdb.is_some())])?;
        }
        let url = self.rdb.as_deref().and_then(download::is_url);
        if url.is_none() && self.rdb_credentials.is_some() {
            return Err(
                "--rdb-credentials applies only with --rdb https://...: a file on this machine needs none; remove it, or name the file by its URL".into(),
            );
        }
        // The flags that size a published workload: a file or a profile brings its own.
        let sizing = [
            ("--members", self.members.is_some()),
            ("--requests", self.requests.is_some()),
            ("--keys", self.keys.is_some()),
            ("--records", self.records.is_some()),
            ("--value-size", self.value_size.is_some()),
        ];
        let workload = match kind {
            WorkloadKind::Rdb => {
                stray(&sizing)?;
                let Some(path) = &self.rdb else {
                    return Err(
                        "--workload rdb needs --rdb FILE (a dump a server saved: dump.rdb)".into(),
                    );
                };
                match url {
                    // Fetched when the run starts (Workload::fetched), not to make a plan.
                    Some(url) => {
                        download::check_url(url).map_err(|e| format!("--rdb {e}"))?;
                        Workload::Rdb(RdbLoad::at_url(
                            url,
                            self.rdb_credentials
                                .as_ref()
                                .map(|d| d.display().to_string()),
                        ))
                    }
                    None => Workload::Rdb(
                        RdbLoad::scan(&path.display().to_string()).map_err(|e| e.to_string())?,
                    ),
                }
            }
            WorkloadKind::SortedSet => {
                stray(&[
                    ("--requests", self.requests.is_some()),
                    ("--keys", self.keys.is_some()),
                    ("--records", self.records.is_some()),
                    ("--value-size", self.value_size.is_some()),
                ])?;
                Workload::SortedSet {
                    members: required(self.members, "--members", "sorted-set")?,
                    key: self.key.clone(),
                    sample_every: self.sample_every,
                }
            }
            WorkloadKind::RandomStrings => {
                stray(&[
                    ("--members", self.members.is_some()),
                    ("--keys", self.keys.is_some()),
                    ("--records", self.records.is_some()),
                ])?;
                Workload::RandomStrings {
                    requests: required(self.requests, "--requests", "random-strings")?,
                    keyspace: required(self.keyspace, "--keyspace", "random-strings")?,
                    value_size: self.value_size.unwrap_or(16),
                    seed: self.seed,
                }
            }
            WorkloadKind::Strings => {
                stray(&[
                    ("--members", self.members.is_some()),
                    ("--requests", self.requests.is_some()),
                    ("--records", self.records.is_some()),
                ])?;
                Workload::Strings {
                    keys: required(self.keys, "--keys", "strings")?,
                    value_size: self.value_size.unwrap_or(100),
                }
            }
            WorkloadKind::Profile => {
                stray(&sizing)?;
                let Some((profile, origin)) = read_profile(profile_file)? else {
                    return Err(
                        "--workload profile needs --profile FILE (what `membench profile` prints)"
                            .into(),
                    );
                };
                Workload::Profile(
                    ProfileWorkload::new(
                        profile,
                        self.scale.unwrap_or(1.0),
                        self.element_scale.unwrap_or(1.0),
                        self.seed,
                    )
                    .map_err(|e| format!("{origin}: {e}"))?,
                )
            }
            WorkloadKind::Records => {
                stray(&[
                    ("--members", self.members.is_some()),
                    ("--requests", self.requests.is_some()),
                    ("--keys", self.keys.is_some()),
                ])?;
                Workload::Records {
                    records: required(self.records, "--records", "records")?,
                    layout: match self.layout {
                        LayoutArg::Hash => RecordLayout::Hash,
                        LayoutArg::Strings => RecordLayout::Strings,
                    },
                    fields: self.fields.clone(),
                }
            }
        };
        workload.validate().map_err(|e| e.to_string())?;
        Ok(workload)
    }

    /// The plan the flags ask for, and its workload (a profile's read from `profile_file`):
    /// the checks of each phase's flags, and of which flags go together, with messages that
    /// name the flags.
    pub(super) fn plan(
        &self,
        profile_file: Option<&std::path::Path>,
        thresholds: StabilityThresholds,
    ) -> Result<(RunPlan, Workload), String> {
        let workload = self.workload(profile_file)?;
        let mut settings = RunSettings {
            pipeline: self.pipeline,
            batches_in_flight: self.batches_in_flight,
            repetitions: self.repetitions,
            settle_seconds: self.settle_seconds,
            thresholds,
            other_clients_timeout: std::time::Duration::from_secs(self.other_clients_timeout),
            ..RunSettings::default()
        };
        settings.refuse_existing_keys = !self.flush;
        settings.read_config = self.read_config.clone();
        settings.own_all_slots = self.own_all_slots;
        let flag = |name: &str| match name {
            "ttlSeconds" => "--ttl-seconds".to_string(),
            _ => "--ttl-share".to_string(),
        };
        settings.ttl = Ttl::checked(
            self.ttl_seconds,
            self.ttl_share,
            settings.settle_seconds,
            workload.kind() == "sorted-set",
            &flag,
        )
        .map_err(|e| e.to_string())?;
        settings.churn = self.churn()?;
        if let Some(churn) = &settings.churn {
            churn
                .check_workload(&workload, settings.ttl.is_some(), "--churn-rounds")
                .map_err(|e| e.to_string())?;
        }
        settings.snapshot = self.snapshot(&workload)?;
        settings.replica = self
            .replica_writes_per_sec
            .map(|rate| {
                let spec = membench::crd::ReplicaSpec {
                    writes_per_sec: rate,
                };
                ReplicaRate::checked(&spec, "--replica-writes-per-sec")
            })
            .transpose()
            .map_err(|e| e.to_string())?;
        settings.eviction = self.eviction()?;
        if let Some(eviction) = &settings.eviction {
            eviction
                .check_workload(&workload, "--maxmemory")
                .map_err(|e| e.to_string())?;
        }
        settings
            .validate()
            .map_err(|e| e.to_string().replacen("invalid ", "invalid --", 1))?;
        Ok((
            RunPlan::new(WorkloadPlan::of(&workload), settings),
            workload,
        ))
    }

    /// The snapshot the flags ask for: none without --snapshot-writes-per-sec, whose share is
    /// refused alone.
    fn snapshot(&self, workload: &Workload) -> Result<Option<Snapshot>, String> {
        let rate = match (self.snapshot_writes_per_sec, self.snapshot_write_share) {
            (None, Some(_)) => {
                return Err("--snapshot-write-share applies only with --snapshot-writes-per-sec N: add it, or remove --snapshot-write-share".into());
            }
            (None, None) => return Ok(None),
            (Some(rate), _) => rate,
        };
        let spec = membench::crd::SnapshotSpec {
            writes_per_sec: rate,
            write_share: self
                .snapshot_write_share
                .unwrap_or_else(membench::crd::default_write_share),
        };
        let flag = |name: &str| match name {
            "writeShare" => "--snapshot-write-share".to_string(),
            _ => "--snapshot-writes-per-sec".to_string(),
        };
        Snapshot::checked(&spec, &flag)
            .and_then(|s| {
                s.check_workload(workload, "--snapshot-writes-per-sec")
                    .map(|_| Some(s))
            })
            .map_err(|e| e.to_string())
    }
}

/// The profile to rebuild, with where it was read for messages: `profile_file`, else
/// `$MEMBENCH_PROFILE` (a client pod's inline profile), else none. In a client pod that reads
/// a file, the operator also gives the digest of the profile it checked, which must match.
pub(super) fn read_profile(
    profile_file: Option<&std::path::Path>,
) -> Result<Option<(Profile, String)>, String> {
    let (text, origin) = match (profile_file, std::env::var(PROFILE_ENV)) {
        (Some(path), _) => (
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --profile {}: {e}", path.display()))?,
            format!("--profile {}", path.display()),
        ),
        (None, Ok(text)) => (text, format!("the profile in ${PROFILE_ENV}")),
        (None, Err(_)) => return Ok(None),
    };
    let profile = Profile::parse(&text).map_err(|e| format!("{origin}: {e}"))?;
    if let Ok(expected) = std::env::var(PROFILE_DIGEST_ENV) {
        let digest = profile_digest(&profile);
        if digest != expected {
            return Err(format!(
                "{origin} is not the profile the operator checked (digest {digest}, expected {expected}): its ConfigMap changed after the benchmark was accepted; delete and re-create the MemoryBenchmark to run the new profile"
            ));
        }
    }
    Ok(Some((profile, origin)))
}

#[cfg(test)]
mod tests;
