//! `membench load`: one workload into one running engine, measured.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use membench::client::engine::EngineAddress;
use membench::client::measure::{BenchmarkReport, LoadOptions, measure_shards_journaled};
use membench::client::profile_workload::{
    PROFILE_DIGEST_ENV, PROFILE_ENV, ProfileWorkload, profile_digest,
};
use membench::client::progress::ProgressReporter;
use membench::client::stop::{
    Journal, ResultFile, STOP_DEADLINE, stop_on_signals, write_journal_and_exit,
};
use membench::client::workload::Workload;
use membench::crd::RecordLayout;
use membench::error::ErrorCategory;
use membench::profile::Profile;
use membench::report::table::{ComparisonRow, OutputFormat, comparison_table, repetitions_table};

use super::{StabilityArgs, usage_error};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum WorkloadKind {
    SortedSet,
    RandomStrings,
    Strings,
    Records,
    /// A keyspace rebuilt from a profile (`membench profile`), with --profile FILE.
    Profile,
}

#[derive(Args)]
pub struct LoadArgs {
    /// The engine's address, HOST:PORT. Given 2 to 16 times, the shards of a cluster, shard i
    /// at the i-th: cluster-mode nodes that own no slots, which membench joins (CLUSTER MEET,
    /// the 16384 slots split evenly) before the first baseline, or a cluster those nodes
    /// already form; the load goes over one connection per shard, and the figures are the sums
    /// over the shards.
    #[arg(long, required = true, value_name = "HOST:PORT")]
    addr: Vec<String>,
    /// Empty a server that already holds keys (FLUSHALL: every database) before measuring.
    /// Without it, a server that is not empty is refused (exit 2), naming how many keys it
    /// holds: a benchmark starts each repetition with FLUSHALL.
    #[arg(long)]
    flush: bool,
    /// Leave the benchmark's keys in the server when it ends. Without it, membench flushes what
    /// it wrote, so the server is left as empty as it found it.
    #[arg(long)]
    keep_data: bool,
    /// Give items a TTL of this many seconds, set with the write (SET ... EX, EXPIRE after HSET
    /// and after the sorted set's first ZADD); at least 60 more than --settle-seconds.
    #[arg(long, value_name = "SECONDS")]
    ttl_seconds: Option<u32>,
    /// The share of items that get the TTL, above 0 and at most 1 (default 1 with
    /// --ttl-seconds), spread evenly.
    #[arg(long, value_name = "SHARE")]
    ttl_share: Option<f64>,
    /// After each repetition's readings, this many rounds of deletes and overwrites on the
    /// loaded data, each followed by a memory reading (strings, records and sorted-set).
    #[arg(long, value_name = "N")]
    churn_rounds: Option<u32>,
    /// The share of the items still held that each churn round deletes, above 0 and below 1.
    #[arg(long, value_name = "SHARE")]
    delete_share: Option<f64>,
    /// The share of the items a churn round left that it overwrites, above 0 and at most 1.
    #[arg(long, value_name = "SHARE")]
    overwrite_share: Option<f64>,
    /// The size in bytes of the values a churn overwrite writes.
    #[arg(long, value_name = "BYTES")]
    overwrite_value_size: Option<u32>,
    /// After the churn rounds (and --settle-seconds), switch active defragmentation on and
    /// follow it until RSS stops falling (refused on a build that cannot defragment). Dragonfly
    /// has no switch: its maxmemory is lowered for the window, and it must run with
    /// --mem_defrag_check_sec_interval=1 (60 s by default, past the window).
    #[arg(long)]
    defrag: bool,
    /// The longest defragmentation window, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = membench::crd::default_defrag_seconds())]
    defrag_seconds: u32,
    /// The seed of the churn's draws (which items each round deletes and overwrites).
    #[arg(long, value_name = "SEED", default_value_t = membench::crd::default_churn_seed())]
    churn_seed: u64,
    /// After each repetition's readings, save a snapshot (BGSAVE) while overwriting loaded
    /// keys at this many writes per second, and measure the peak: the engine's process tree's
    /// Pss when it runs on this machine, the copy-on-write it reports, the save's duration and
    /// the writes' latency (strings, records). Writes the server's snapshot file (the new
    /// files of a Dragonfly on this machine are removed after each save).
    #[arg(long, value_name = "N")]
    snapshot_writes_per_sec: Option<u32>,
    /// The share of the loaded items those writes are spread over (default 1).
    #[arg(long, value_name = "SHARE")]
    snapshot_write_share: Option<f64>,
    /// After each repetition's readings (and its snapshot), make the server at HOST:PORT, an
    /// empty engine of the same kind (reached with --password too), a replica of --addr
    /// (REPLICAOF, with its masterauth set to --password when one is given) while overwriting loaded keys at --replica-writes-per-sec,
    /// until it is in sync (INFO replication), then measure: the primary's process tree's peak
    /// when it runs on this machine and the copy-on-write it reports, the replica's memory and
    /// keys (verified against the primary's), the sync's duration and the writes' latency
    /// (strings, records; one --addr). The replica is then detached (REPLICAOF NO ONE) and
    /// emptied (FLUSHALL); a replica that holds keys is refused. It must be able to reach the
    /// primary at --addr.
    #[arg(long, value_name = "HOST:PORT", requires = "replica_writes_per_sec")]
    replica: Option<String>,
    /// The overwrites per second during the replica's sync, over every loaded key.
    #[arg(long, value_name = "N", requires = "replica")]
    replica_writes_per_sec: Option<u32>,
    /// After each repetition's other phases, empty the engine, give it this maxmemory (100mb,
    /// 2gb, bytes) and load the workload past it (strings, records).
    #[arg(long, value_name = "SIZE")]
    maxmemory: Option<String>,
    /// The maxmemory-policy of that load (default allkeys-lru).
    #[arg(long, value_name = "POLICY")]
    maxmemory_policy: Option<String>,
    /// How much that load writes, as a multiple of maxmemory (default 3).
    #[arg(long, value_name = "MULTIPLE")]
    load_to: Option<f64>,
    /// Make the engine, a cluster-mode node that owns no slots, a one-node cluster owning all
    /// 16384 slots (CLUSTER ADDSLOTSRANGE) before the first baseline. With several --addr, the
    /// shards are joined whether it is given or not.
    #[arg(long)]
    own_all_slots: bool,
    /// Engine settings to read back with CONFIG GET into the result's engine.config, comma
    /// separated (the settings a spec's engines[].config changed; the operator's client pod
    /// passes them). A setting the engine does not report lands in engine.config_unreported.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    read_config: Vec<String>,
    /// The engine's password, if it requires one.
    #[arg(long, env = "MEMBENCH_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// Which published workload to load.
    #[arg(long, value_enum)]
    workload: WorkloadKind,
    /// sorted-set: how many members to add to the one sorted set.
    #[arg(long)]
    members: Option<u64>,
    /// sorted-set: the key of the sorted set.
    #[arg(long, default_value = "membench:zset")]
    key: String,
    /// sorted-set: read used_memory every this many members (0: no growth curve).
    #[arg(long, default_value_t = 1_000_000)]
    sample_every: u64,
    /// random-strings: how many SETs to send (valkey-benchmark -n).
    #[arg(long)]
    requests: Option<u64>,
    /// random-strings: the key space the keys are drawn from (valkey-benchmark -r).
    #[arg(long)]
    keyspace: Option<u64>,
    /// random-strings and profile: seed of the generator (a profile's rebuild is the same data
    /// for the same seed, on every engine).
    #[arg(long, default_value_t = membench::crd::default_seed())]
    seed: u64,
    /// profile: the profile to rebuild (YAML or JSON, as `membench profile` prints it).
    #[arg(long, value_name = "FILE")]
    profile: Option<std::path::PathBuf>,
    /// profile: store this many times the profile's keys.
    #[arg(long)]
    scale: Option<f64>,
    /// profile: grow the element counts of hashes, sets, sorted sets, lists and streams by
    /// this factor (for data that grows inside its keys).
    #[arg(long)]
    element_scale: Option<f64>,
    /// strings: how many distinct keys to store.
    #[arg(long)]
    keys: Option<u64>,
    /// random-strings and strings: value size in bytes (default 16 for random-strings, 100 for
    /// strings, as published).
    #[arg(long)]
    value_size: Option<u32>,
    /// records: how many records to store.
    #[arg(long)]
    records: Option<u64>,
    /// records: one hash per record, or one string key per field.
    #[arg(long, value_enum, default_value = "hash")]
    layout: LayoutArg,
    /// records: the field names of a record, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "name,age,city,score")]
    fields: Vec<String>,
    #[command(flatten)]
    measurement: MeasurementArgs,
    /// How to print the results.
    #[arg(long, value_enum, default_value = "table")]
    output: OutputFormat,
    /// Also write a compact result (under 4 KB, even at 100 repetitions) to this file. Client
    /// pods pass their container's termination message path, which is how the operator reads
    /// their results.
    #[arg(long, value_name = "PATH")]
    result_file: Option<std::path::PathBuf>,
    /// Serve where the load stands over HTTP on this port (client pods: the operator reads it
    /// for the benchmark's progress).
    #[arg(long, value_name = "PORT")]
    progress_port: Option<u16>,
    /// After a run that finished every repetition, keep serving its whole result beside the
    /// progress for up to this many seconds, until SIGTERM (client pods: the operator takes
    /// the result from there, then deletes the pod). Only when the progress was read during
    /// the run; 0 leaves at once. The result file is written first either way.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    serve_result_seconds: u64,
    /// At each peak phase's start and end, wait (at most 60 s) for the reader of the progress
    /// (the operator) to answer with the engine container's memory as the kubelet read it,
    /// when the engine's processes are not on this machine (client pods on a real node). Needs
    /// --progress-port.
    #[arg(long, requires = "progress_port")]
    container_memory_marks: bool,
    /// The address to serve progress on (client pods: their pod IP, from the downward API).
    #[arg(
        long,
        env = "MEMBENCH_POD_IP",
        default_value = "0.0.0.0",
        value_name = "IP"
    )]
    progress_ip: std::net::IpAddr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LayoutArg {
    Hash,
    Strings,
}

/// Flags shared by the commands that measure.
#[derive(Args, Clone, Debug)]
pub struct MeasurementArgs {
    /// Commands per batch, on the one connection: each batch is sent whole and its replies
    /// read whole. With several --addr (shards), a batch is split over the shards'
    /// connections by the owner of each command's key.
    #[arg(long, default_value_t = 100)]
    pipeline: u32,
    /// Batches sent before the first one's replies are read: 1 keeps at most --pipeline
    /// commands unanswered, like `redis-benchmark -P`; more send the next batches while the
    /// engine works on the first (never more than 64 KiB of commands in flight, and a larger
    /// batch goes alone).
    #[arg(long, default_value_t = 8)]
    batches_in_flight: u32,
    /// How many times to load the workload, flushing in between.
    #[arg(long, default_value_t = 10)]
    repetitions: u32,
    /// Seconds to wait after each load before a second memory reading (0: none).
    #[arg(long, default_value_t = 0)]
    settle_seconds: u32,
    /// Seconds to wait for the engine's other clients to disconnect before each baseline and
    /// final memory reading (their buffers would count as data); a client still connected
    /// then fails the repetition, naming it.
    #[arg(long, value_name = "SECONDS", default_value_t = membench::client::measure::DEFAULT_OTHER_CLIENTS_TIMEOUT.as_secs())]
    other_clients_timeout: u64,
    #[command(flatten)]
    stability: StabilityArgs,
}

impl MeasurementArgs {
    fn options(&self) -> LoadOptions {
        LoadOptions {
            pipeline: self.pipeline,
            batches_in_flight: self.batches_in_flight,
            repetitions: self.repetitions,
            settle_seconds: self.settle_seconds,
            thresholds: self.stability.thresholds(),
            other_clients_timeout: std::time::Duration::from_secs(self.other_clients_timeout),
            ..LoadOptions::default()
        }
    }
}

/// Says which flag a workload needs when it is missing, and refuses a count of zero as a
/// spec does, in the same words.
fn required(value: Option<u64>, flag: &str, workload: &str) -> Result<u64, String> {
    match value {
        None => Err(format!("--workload {workload} needs {flag} N")),
        Some(0) => Err(format!(
            "invalid {flag}: {}",
            membench::client::workload::AT_LEAST_ONE
        )),
        Some(n) => Ok(n),
    }
}

impl LoadArgs {
    /// The churn the flags ask for: none without --churn-rounds, whose companions are refused
    /// alone.
    fn churn(&self) -> Result<Option<membench::client::churn::Churn>, String> {
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
        membench::client::churn::Churn::checked(&spec, &flag)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    /// The load past maxmemory the flags ask for: none without --maxmemory, whose companions
    /// are refused alone.
    fn eviction(&self) -> Result<Option<membench::client::eviction::Eviction>, String> {
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
        membench::client::eviction::Eviction::checked(&spec, &flag)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    fn workload(&self) -> Result<Workload, String> {
        let stray = |flags: &[(&str, bool)]| -> Result<(), String> {
            match flags.iter().find(|(_, set)| *set) {
                Some((flag, _)) => Err(format!(
                    "{flag} does not apply to --workload {}",
                    self.workload.to_possible_value().unwrap().get_name()
                )),
                None => Ok(()),
            }
        };
        if self.workload != WorkloadKind::Profile {
            stray(&[
                ("--profile", self.profile.is_some()),
                ("--scale", self.scale.is_some()),
                ("--element-scale", self.element_scale.is_some()),
            ])?;
        }
        let workload = match self.workload {
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
                stray(&[
                    ("--members", self.members.is_some()),
                    ("--requests", self.requests.is_some()),
                    ("--keys", self.keys.is_some()),
                    ("--records", self.records.is_some()),
                    ("--value-size", self.value_size.is_some()),
                ])?;
                // A client pod has its profile in the environment, from the spec.
                let (text, origin) = match (&self.profile, std::env::var(PROFILE_ENV)) {
                    (Some(path), _) => (
                        std::fs::read_to_string(path).map_err(|e| {
                            format!("cannot read --profile {}: {e}", path.display())
                        })?,
                        format!("--profile {}", path.display()),
                    ),
                    (None, Ok(text)) => (text, format!("the profile in ${PROFILE_ENV}")),
                    (None, Err(_)) => {
                        return Err("--workload profile needs --profile FILE (what `membench profile` prints)".into());
                    }
                };
                let profile = Profile::parse(&text).map_err(|e| format!("{origin}: {e}"))?;
                // In a client pod, the operator checked this profile before anything started.
                if let Ok(expected) = std::env::var(PROFILE_DIGEST_ENV) {
                    let digest = profile_digest(&profile);
                    if digest != expected {
                        return Err(format!(
                            "{origin} is not the profile the operator checked (digest {digest}, expected {expected}): its ConfigMap changed after the benchmark was accepted; delete and re-create the MemoryBenchmark to run the new profile"
                        ));
                    }
                }
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
}

pub fn run_load(args: LoadArgs) -> ExitCode {
    let workload = match args.workload() {
        Ok(w) => w,
        Err(message) => return usage_error(&message),
    };
    let mut options = args.measurement.options();
    options.refuse_existing_keys = !args.flush;
    options.read_config = args.read_config.clone();
    options.own_all_slots = args.own_all_slots;
    let flag = |name: &str| match name {
        "ttlSeconds" => "--ttl-seconds".to_string(),
        _ => "--ttl-share".to_string(),
    };
    options.ttl = match membench::client::ttl::Ttl::checked(
        args.ttl_seconds,
        args.ttl_share,
        options.settle_seconds,
        workload.kind() == "sorted-set",
        &flag,
    ) {
        Ok(ttl) => ttl,
        Err(e) => return usage_error(&e.to_string()),
    };
    options.churn = match args.churn() {
        Ok(churn) => churn,
        Err(message) => return usage_error(&message),
    };
    if let Some(churn) = &options.churn
        && let Err(e) = churn.check_workload(&workload, options.ttl.is_some(), "--churn-rounds")
    {
        return usage_error(&e.to_string());
    }
    options.snapshot = match (args.snapshot_writes_per_sec, args.snapshot_write_share) {
        (None, Some(_)) => {
            return usage_error(
                "--snapshot-write-share applies only with --snapshot-writes-per-sec N: add it, or remove --snapshot-write-share",
            );
        }
        (None, None) => None,
        (Some(rate), share) => {
            let spec = membench::crd::SnapshotSpec {
                writes_per_sec: rate,
                write_share: share.unwrap_or_else(membench::crd::default_write_share),
            };
            let flag = |name: &str| match name {
                "writeShare" => "--snapshot-write-share".to_string(),
                _ => "--snapshot-writes-per-sec".to_string(),
            };
            match membench::client::snapshot::Snapshot::checked(&spec, &flag).and_then(|s| {
                s.check_workload(&workload, "--snapshot-writes-per-sec")
                    .map(|_| s)
            }) {
                Ok(snapshot) => Some(snapshot),
                Err(e) => return usage_error(&e.to_string()),
            }
        }
    };
    options.eviction = match args.eviction() {
        Ok(eviction) => eviction,
        Err(message) => return usage_error(&message),
    };
    if let Some(eviction) = &options.eviction
        && let Err(e) = eviction.check_workload(&workload, "--maxmemory")
    {
        return usage_error(&e.to_string());
    }
    if let Err(e) = options.validate() {
        return usage_error(&e.to_string().replacen("invalid ", "invalid --", 1));
    }
    let addresses = match args
        .addr
        .iter()
        .map(|addr| EngineAddress::parse(addr, args.password.clone()))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|addresses| {
            membench::client::shards::check_shard_count(addresses.len())?;
            membench::client::shards::check_distinct(&addresses)?;
            Ok(addresses)
        }) {
        Ok(a) => a,
        Err(e) => return usage_error(&e.to_string()),
    };
    if let (Some(replica), Some(rate)) = (&args.replica, args.replica_writes_per_sec) {
        let spec = membench::crd::ReplicaSpec {
            writes_per_sec: rate,
        };
        let replica =
            membench::client::replica::ReplicaRate::checked(&spec, "--replica-writes-per-sec")
                .and_then(|rate| {
                    EngineAddress::parse(replica, args.password.clone())
                        .map_err(|_| membench::error::BenchError::InvalidArgument {
                            field: "--replica".into(),
                            message: format!(
                                "'{replica}' is not HOST:PORT (for example 127.0.0.1:6380)"
                            ),
                        })
                        .map(|address| rate.at(address))
                })
                .and_then(|replica| {
                    replica
                        .check_before_writes(
                            &addresses,
                            &workload,
                            options.connect_timeout,
                            "--replica",
                            args.flush,
                        )
                        .map(|note| {
                            if let Some(note) = note {
                                eprintln!("warning: {note}");
                            }
                            replica
                        })
                });
        match replica {
            Ok(replica) => options.replica = Some(replica),
            Err(e) => return usage_error(&e.to_string()),
        }
    }
    let target = match addresses.as_slice() {
        [only] => only.to_string(),
        shards => format!(
            "{} shards ({})",
            shards.len(),
            shards
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    // SIGINT and SIGTERM (Ctrl-C, `timeout`, the pod being deleted) end the run with what it
    // measured, printed and written below; a run that cannot end in time has its journal
    // written by the handler.
    let result_file = std::sync::Arc::new(ResultFile::new(args.result_file.clone()));
    let output = args.output;
    // The report is printed once: by the run that returned, or by the deadline after a stop.
    let printed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let print_once = {
        let printed = printed.clone();
        move |report: &BenchmarkReport| {
            if !printed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                print_report(report, output);
            }
        }
    };
    let journal = Journal::new(BenchmarkReport::nothing_measured(&workload, &options));
    if let Err(e) = stop_on_signals(
        options.stop.clone(),
        STOP_DEADLINE,
        write_journal_and_exit(
            journal.clone(),
            result_file.clone(),
            STOP_DEADLINE,
            print_once.clone(),
        ),
    ) {
        eprintln!(
            "warning: cannot handle SIGINT and SIGTERM ({e}); a stopped run would leave no result"
        );
    }
    let mut progress = ProgressReporter::new(&format!("{} at {target}", workload.kind()));
    let endpoint =
        std::sync::Arc::new(membench::client::progress_endpoint::ProgressEndpoint::default());
    if args.container_memory_marks {
        options.container = Some(endpoint.clone());
    }
    if let Some(port) = args.progress_port {
        let at = std::net::SocketAddr::new(args.progress_ip, port);
        // Progress is a convenience: a load without it measures the same.
        if let Err(e) = endpoint.serve(at) {
            eprintln!("warning: cannot serve progress on {at}: {e}");
        }
    }
    let report = measure_shards_journaled(
        &addresses,
        &workload,
        &options,
        &mut |p| {
            journal.progress(p.commands_done);
            endpoint.update(&p);
            progress.update(p)
        },
        &mut |r| {
            journal.record(r);
            endpoint.set_result(r, false);
        },
    );
    progress.finish();
    let refused = report.error.as_ref().is_some_and(|e| {
        // A server that holds keys, or a setting the engine cannot do (a defrag its
        // allocator lacks), refused before any write.
        e.category == ErrorCategory::ServerNotEmpty
            || (e.category == ErrorCategory::InvalidSpec
                && report.repetitions.is_empty()
                && report.failed_repetition.is_none())
    });
    if !args.keep_data && !refused {
        for address in &addresses {
            flush_what_was_written(address, &report);
        }
    }
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    if let Err(e) = result_file.write(&report) {
        let path = args
            .result_file
            .as_deref()
            .unwrap_or(std::path::Path::new(""));
        eprintln!("error: cannot write the result to {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    print_once(&report);
    if args.progress_port.is_some() && report.error.is_none() {
        endpoint.set_result(&report, true);
        let wait = std::time::Duration::from_secs(args.serve_result_seconds);
        if endpoint.linger(&options.stop, wait) && !options.stop.requested() {
            eprintln!(
                "warning: nobody took the whole result within --serve-result-seconds {}; the result file holds it (fitted)",
                args.serve_result_seconds
            );
        }
    }
    match &report.error {
        Some(e) => {
            eprintln!("error: {}", e.message);
            match options.stop.cause() {
                Some(cause) => ExitCode::from(cause.exit_code()),
                None if refused => ExitCode::from(2),
                None => ExitCode::FAILURE,
            }
        }
        None => ExitCode::SUCCESS,
    }
}

/// Prints what was measured as `format` asks: the finished run's report, or the journal of a
/// stopped one that could not return.
fn print_report(report: &BenchmarkReport, format: OutputFormat) {
    match format {
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(report).expect("reports serialize")
        ),
        // Nothing measured: the error says it all (as below); no header over no rows.
        OutputFormat::Csv if report.repetitions.is_empty() => {}
        // The same table as `membench run`'s, without a title: no benchmark, one engine.
        OutputFormat::Csv => {
            let row = ComparisonRow::from_report(report, None);
            let labels = membench::report::csv::BenchmarkLabels::default();
            let rows = membench::report::csv::rows_of_report(&labels, report, &row);
            print!(
                "{}{}",
                membench::report::csv::header(),
                membench::report::csv::lines(rows)
            );
        }
        // Nothing measured (an engine that could not be reached, a server refused): the error
        // says it all, and a row of dashes would say nothing.
        format => {
            if !report.repetitions.is_empty() {
                let modules = membench::crd::describe_modules(report.engine.modules.as_deref());
                println!(
                    "{} on {} {} ({}, modules: {}, {}), pipeline {}\n",
                    report.workload.description,
                    report.engine.name,
                    report.engine.version,
                    report.engine.allocator_label(),
                    if modules.is_empty() {
                        "not reported"
                    } else {
                        &modules
                    },
                    report.engine.arch,
                    report.pipeline
                );
                if format == OutputFormat::Table {
                    println!("{}", repetitions_table(report).render(format));
                    if let Some(churn) = membench::report::churn::churn_table(report) {
                        println!("After the load, churn (spec.churn):\n{}", churn.to_text());
                    }
                    if let Some(growth) = membench::report::table::growth_table(report) {
                        println!(
                            "used_memory during the load (repetition 1):\n{}",
                            growth.to_text()
                        );
                    }
                }
                let rows = vec![ComparisonRow::from_report(report, None)];
                print!("{}", comparison_table(&rows).render(format));
                for (heading, table) in
                    membench::report::shards::shard_tables(std::slice::from_ref(report))
                {
                    println!("\n{heading}:\n{}", table.render(format));
                }
            }
        }
    }
}

/// Empties the server of the benchmark's keys at the end (it held nothing else, or --flush
/// emptied it), unless the load never reached it.
fn flush_what_was_written(address: &EngineAddress, report: &BenchmarkReport) {
    if report.engine.version.is_empty() {
        return;
    }
    let flushed = membench::client::engine::ControlConnection::open(address, STOP_DEADLINE)
        .and_then(|mut control| control.flush_all());
    if let Err(e) = flushed {
        eprintln!(
            "warning: cannot flush the benchmark's keys from {address} ({e}); FLUSHALL there removes them"
        );
    }
}
