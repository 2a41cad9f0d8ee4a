//! The local runner behind `membench run SPEC.yaml`: takes MemoryBenchmark specs (read by
//! [`crate::validation::spec_file`]), starts each engine as a local process (persistence off, a
//! free loopback port), measures it, stops it, and compares the engines. One engine runs at a time, as in the published method. The spec's
//! `arch` picks the engine store's builds of that architecture; those of another architecture
//! than this machine's run under qemu-user, and their rates are marked as the emulator's.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::client::connection::engine::{ControlConnection, EngineAddress};
use crate::client::connection::stop_request::StopRequest;
use crate::client::measurement::load_options::RunSettings;
use crate::client::measurement::measure::{
    BenchmarkReport, ClusterCost, LoadOptions, LoadProgress, measure_shards_journaled,
};
use crate::client::measurement::plan::RunPlan;
use crate::client::workloads::workload::Workload;
use crate::crd::{EngineKind, EngineSpec, MemoryBenchmark};
use crate::error::BenchError;
use crate::local::engine_store::{LocalProgram, resolve_program_for};
use crate::report::local_run::{HostInfo, LocalComparison};
use crate::stats::StabilityThresholds;

/// Keeps only the engine entries named in `names` (`engines[].name`, or `<engine>-<version>`),
/// and only the benchmarks that keep at least one, so one engine of a long comparison can be
/// run again on its own. A name no benchmark has is an error listing the names there are.
pub fn select_engines(
    benchmarks: &mut Vec<MemoryBenchmark>,
    names: &[String],
) -> Result<(), String> {
    if names.is_empty() {
        return Ok(());
    }
    let mut known: Vec<String> = Vec::new();
    for name in benchmarks
        .iter()
        .flat_map(|b| b.spec.engines.iter().map(EngineSpec::display_name))
    {
        if !known.contains(&name) {
            known.push(name);
        }
    }
    if let Some(unknown) = names.iter().find(|n| !known.contains(n)) {
        return Err(format!(
            "--engine {unknown}: no engine of the spec has that name; its engines are {}",
            known.join(", ")
        ));
    }
    for benchmark in benchmarks.iter_mut() {
        benchmark
            .spec
            .engines
            .retain(|e| names.contains(&e.display_name()));
    }
    benchmarks.retain(|b| !b.spec.engines.is_empty());
    Ok(())
}

/// What a local run cannot do with a spec, said before anything runs: read an RDB file from a
/// PersistentVolumeClaim; and as this machine is one instance, `instanceTypes` may name at
/// most one (which is then recorded, as `instanceType` is). `parallelism` is not refused: a
/// local run measures one engine at a time whatever it says (engines beside each other on one
/// machine would share its cores), and [`local_notes`] says so.
pub fn refuse_cluster_only(benchmark: &MemoryBenchmark) -> Result<(), String> {
    if let Some(secret) = benchmark.spec.workload.rdb_credentials() {
        return Err(format!(
            "spec.workload.rdb.credentialsSecret ({}) applies in a cluster only: a local run cannot read a Secret; fetch the file with membench load --workload rdb --rdb URL --rdb-credentials DIR (DIR holds the Secret's keys as files: username and password, or token, and ca.crt), or download it and set spec.workload.rdb.path",
            secret.name
        ));
    }
    if let Some(claim) = benchmark.spec.workload.rdb_claim() {
        return Err(format!(
            "spec.workload.rdb.persistentVolumeClaim ({}) applies in a cluster only: a local run reads the file on this machine; remove persistentVolumeClaim and set spec.workload.rdb.path to the file's path here",
            claim.claim_name
        ));
    }
    let types = &benchmark.spec.instance_types;
    if types.len() > 1 {
        return Err(format!(
            "spec.instanceTypes names {} instance types ({}): a local run has one machine, so it cannot run the engines on each; run the benchmark in a cluster (kubectl apply -f), or keep one instance type to record",
            types.len(),
            types.join(", ")
        ));
    }
    Ok(())
}

/// Notes on what a local run does differently from a cluster with this spec.
pub fn local_notes(benchmark: &MemoryBenchmark) -> Vec<String> {
    let mut notes = Vec::new();
    if benchmark.spec.parallelism > 1 {
        notes.push(format!(
            "spec.parallelism is {}: a local run measures one engine at a time on this machine (in a cluster, up to {} run at once, each on its own node)",
            benchmark.spec.parallelism, benchmark.spec.parallelism
        ));
    }
    notes
}

/// The arguments membench starts an engine with: its port on loopback, persistence off,
/// then the spec's own arguments (which can override any of these).
pub fn server_args(kind: EngineKind, port: u16, dir: &Path, extra: &[String]) -> Vec<String> {
    let dir = dir.display().to_string();
    let mut args: Vec<String> = match kind {
        EngineKind::Redis | EngineKind::Valkey => [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--dir",
            &dir,
        ]
        .map(String::from)
        .to_vec(),
        // One thread, as Dragonfly's builders run it for memory figures: on a small machine the
        // client needs the other cores, and a thread per core would take them all.
        EngineKind::Dragonfly => vec![
            format!("--port={port}"),
            "--bind=127.0.0.1".into(),
            "--dbfilename=".into(),
            format!("--dir={dir}"),
            "--proactor_threads=1".into(),
            "--logtostderr".into(),
        ],
    };
    args.extend(extra.iter().cloned());
    args
}

/// Makes the engine `command` starts require `password`: Redis and Valkey read it from a
/// config file (their first argument, readable by this user only), Dragonfly from
/// `DFLY_requirepass`.
fn require_password(
    command: &mut Command,
    kind: EngineKind,
    dir: &Path,
    password: &str,
) -> Result<(), BenchError> {
    match kind {
        EngineKind::Dragonfly => {
            command.env(crate::auth::DRAGONFLY_PASSWORD_ENV, password);
        }
        EngineKind::Redis | EngineKind::Valkey => {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let path = dir.join("membench-auth.conf");
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .and_then(|mut file| writeln!(file, "requirepass {password}"))
                .map_err(|e| {
                    BenchError::EngineStart(format!("cannot write {}: {e}", path.display()))
                })?;
            command.arg(&path);
        }
    }
    Ok(())
}

/// A password made for one local run: 128 random bits in hex, from the kernel.
pub fn run_password() -> Result<String, BenchError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .map_err(|e| BenchError::EngineStart(format!("cannot read /dev/urandom: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The engines this process started and has not reaped, so that a stopped run can kill them
/// from its signal thread when a measurement does not return ([`kill_started_engines`]).
static STARTED: Mutex<Vec<Weak<Mutex<Child>>>> = Mutex::new(Vec::new());

/// Kills every engine this process started that still runs: a stopped `membench run` whose
/// measurement is blocked on its engine ends it this way. Each engine's owner then reaps it
/// and removes its directory as always.
pub fn kill_started_engines() {
    let started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    for child in started.iter().filter_map(Weak::upgrade) {
        let _ = child.lock().unwrap_or_else(|e| e.into_inner()).kill();
    }
}

/// An engine running as a child process, stopped when dropped.
pub struct LocalEngine {
    child: Arc<Mutex<Child>>,
    pub address: EngineAddress,
    /// The program it runs, with its store build and preload.
    pub program: LocalProgram,
    dir: PathBuf,
}

impl LocalEngine {
    /// Starts the engine on a free loopback port and waits until it answers PING.
    pub fn start(engine: &EngineSpec, program: &LocalProgram) -> Result<Self, BenchError> {
        Self::start_with_password(engine, program, None)
    }

    /// As [`LocalEngine::start`], the engine requiring `password` when there is one (given in
    /// a file of its private directory or, for Dragonfly, its environment: never on its
    /// command line), and its address carrying it for the load.
    pub fn start_with_password(
        engine: &EngineSpec,
        program: &LocalProgram,
        password: Option<&str>,
    ) -> Result<Self, BenchError> {
        // The port is free when chosen and taken by the engine later: another process (a
        // parallel test's engine) can take it between the two. The engine then fails to bind
        // and exits, and is started again on another port.
        let mut attempt = 1;
        loop {
            match Self::start_once(engine, program, password) {
                Err(StartFailure::PortTaken(port)) if attempt < PORT_ATTEMPTS => {
                    tracing::debug!(port, attempt, "the engine's port was taken; another port");
                    attempt += 1;
                }
                Err(StartFailure::PortTaken(port)) => {
                    return Err(BenchError::EngineStart(format!(
                        "another process took each port chosen for the engine before it could listen ({PORT_ATTEMPTS} tries, the last {port}): free some loopback ports or run fewer engines at once"
                    )));
                }
                Err(StartFailure::Other(error)) => return Err(error),
                Ok(started) => return Ok(started),
            }
        }
    }

    fn start_once(
        engine: &EngineSpec,
        program: &LocalProgram,
        password: Option<&str>,
    ) -> Result<Self, StartFailure> {
        // A cluster node also listens on its cluster bus, the port + 10000.
        let port = if engine.is_cluster() {
            free_port_with_bus()?
        } else {
            free_port()?
        };
        let dir = std::env::temp_dir().join(format!("membench-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| {
            BenchError::EngineStart(format!("cannot create {}: {e}", dir.display()))
        })?;
        let log_path = dir.join("server.log");
        let log = std::fs::File::create(&log_path).map_err(|e| {
            BenchError::EngineStart(format!("cannot create {}: {e}", log_path.display()))
        })?;
        let mut command = program.command();
        if let Some(password) = password {
            require_password(&mut command, engine.engine, &dir, password)?;
        }
        command
            .args(server_args(
                engine.engine,
                port,
                &dir,
                &crate::validation::engine_config::entry_args(engine),
            ))
            // Its own process group: Ctrl-C at the terminal reaches membench only, which stops
            // the engine itself after keeping what was measured.
            .process_group(0)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(
                log.try_clone()
                    .map_err(|e| BenchError::EngineStart(e.to_string()))?,
            )
            .stderr(log);
        let child = command.spawn().map_err(|e| {
            BenchError::EngineStart(format!("cannot start {}: {e}", program.path.display()))
        })?;
        let child = Arc::new(Mutex::new(child));
        {
            let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
            started.retain(|c| c.strong_count() > 0);
            started.push(Arc::downgrade(&child));
        }
        let mut started = Self {
            child,
            address: EngineAddress {
                host: "127.0.0.1".into(),
                port,
                password: password.map(String::from),
            },
            program: program.clone(),
            dir,
        };
        started.wait_until_ready(&log_path)?;
        Ok(started)
    }

    /// Waits until the engine answers on its port, and the port's listening socket is the
    /// engine's own (an answer from another process that took the port is not the engine).
    fn wait_until_ready(&mut self, log_path: &Path) -> Result<(), StartFailure> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.exited() {
                let log = std::fs::read_to_string(log_path).unwrap_or_default();
                if port_taken(&log) {
                    return Err(StartFailure::PortTaken(self.address.port));
                }
                let tail: Vec<&str> = log
                    .lines()
                    .rev()
                    .take(8)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                return Err(StartFailure::Other(BenchError::EngineStart(format!(
                    "the server exited at start ({status}); its last output:\n{}",
                    tail.join("\n")
                ))));
            }
            let answered = matches!(
                ControlConnection::open(&self.address, Duration::from_millis(500)),
                // A server that asks for a password is up; the load will authenticate.
                Ok(_) | Err(BenchError::AuthRequired { .. })
            );
            if answered && listens_on(self.pid(), self.address.port) {
                return Ok(());
            }
            if Instant::now() > deadline {
                let whose = if answered {
                    " (something answered there, but its listening socket is not the engine's)"
                } else {
                    ""
                };
                return Err(StartFailure::Other(BenchError::EngineStart(format!(
                    "the server did not answer on {} within 20 s{whose} (log: {})",
                    self.address,
                    log_path.display()
                ))));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's process ID (for tests that kill it as a crash would).
    pub fn pid(&self) -> u32 {
        self.child().id()
    }

    fn child(&self) -> std::sync::MutexGuard<'_, Child> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How the server ended, once it has.
    fn exited(&self) -> Option<std::process::ExitStatus> {
        self.child().try_wait().ok().flatten()
    }

    /// Stops the server (SHUTDOWN NOSAVE, then a kill if it lingers) and removes its directory.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Ok(control) = ControlConnection::open(&self.address, Duration::from_secs(1)) {
            control.shutdown();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && self.exited().is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut child = self.child();
        let _ = child.kill();
        let _ = child.wait();
        drop(child);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for LocalEngine {
    fn drop(&mut self) {
        if self.exited().is_none() {
            self.shut_down();
        } else {
            // It died on its own (or was killed): its directory goes all the same.
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// How many ports an engine is started on before a start that keeps losing its port fails.
const PORT_ATTEMPTS: u32 = 5;

/// Why one start of an engine failed.
enum StartFailure {
    /// It could not bind the port chosen for it: another process took it first.
    PortTaken(u16),
    Other(BenchError),
}

impl From<BenchError> for StartFailure {
    fn from(error: BenchError) -> Self {
        StartFailure::Other(error)
    }
}

/// Whether an engine's log says it could not listen because its port was in use (Redis and
/// Valkey: "Address already in use"; Dragonfly: "address already in use" or "Could not open
/// port").
fn port_taken(log: &str) -> bool {
    let lower = log.to_ascii_lowercase();
    lower.contains("address already in use") || lower.contains("could not open port")
}

/// Whether process `pid` holds the socket listening on 127.0.0.1:`port`: the kernel's table of
/// TCP sockets (`/proc/net/tcp`) names the listening socket's inode, and the process's file
/// descriptors link to `socket:[inode]` when it is the process's own.
fn listens_on(pid: u32, port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return false;
    };
    let inodes = listening_inodes(&table, port);
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            let target = target.to_string_lossy();
            inodes
                .iter()
                .any(|inode| target == format!("socket:[{inode}]"))
        })
    })
}

/// The inodes of the sockets listening on 127.0.0.1:`port` in `/proc/net/tcp`'s text (local
/// address `0100007F:PORT` in hex, state `0A`, inode the tenth column).
fn listening_inodes(table: &str, port: u16) -> Vec<String> {
    let local = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let columns: Vec<&str> = line.split_whitespace().collect();
            (columns.len() > 9 && columns[1] == local && columns[3] == "0A")
                .then(|| columns[9].to_string())
        })
        .collect()
}

fn free_port() -> Result<u16, BenchError> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| BenchError::EngineStart(format!("no free loopback port: {e}")))?;
    Ok(listener
        .local_addr()
        .map_err(|e| BenchError::EngineStart(e.to_string()))?
        .port())
}

/// A free loopback port whose cluster bus port (+ 10000) is free too, for a cluster-mode node.
fn free_port_with_bus() -> Result<u16, BenchError> {
    for _ in 0..64 {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| BenchError::EngineStart(format!("no free loopback port: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| BenchError::EngineStart(e.to_string()))?
            .port();
        if let Some(bus) = port.checked_add(10000)
            && TcpListener::bind(("127.0.0.1", bus)).is_ok()
        {
            return Ok(port);
        }
    }
    Err(BenchError::EngineStart(
        "no free loopback port whose cluster bus port (+10000) is free too, after 64 tries".into(),
    ))
}

/// Starts an entry's engines: one, or each shard of a sharded cluster (`shards`), every one a
/// process of its own. A shard that fails to start stops those started before it.
pub fn start_engines(
    engine: &EngineSpec,
    program: &LocalProgram,
    password: Option<&str>,
) -> Result<Vec<LocalEngine>, BenchError> {
    let count = engine.shards.unwrap_or(1).max(1) as usize;
    let mut started = Vec::with_capacity(count);
    for index in 0..count {
        match LocalEngine::start_with_password(engine, program, password) {
            Ok(server) => started.push(server),
            Err(e) if count > 1 => {
                return Err(BenchError::EngineStart(format!(
                    "shard {index} of {count} did not start: {e}"
                )));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(started)
}

/// The plan each engine entry of `benchmark` runs, in `spec.engines`' order: the one its client
/// pod receives in a cluster (`membench run --print-plan` prints them).
pub fn run_plans(
    benchmark: &MemoryBenchmark,
    thresholds: StabilityThresholds,
) -> Result<Vec<RunPlan>, BenchError> {
    crate::validation::run_plan::entry_plans(&benchmark.spec, thresholds)
}

/// Runs one benchmark: checks every engine's program first (so a missing one fails before
/// anything runs), then starts, measures and stops the engines one at a time. A stop asked
/// for through `stop` ends the engine under way with what it measured (`Stopped`), stops it,
/// and starts no other: the comparison holds the engines measured until then.
pub fn run_benchmark(
    benchmark: &MemoryBenchmark,
    thresholds: StabilityThresholds,
    stop: &StopRequest,
    on_engine: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<LocalComparison, BenchError> {
    let spec = &benchmark.spec;
    let programs = spec
        .engines
        .iter()
        .enumerate()
        .map(|(i, e)| resolve_program_for(i, e, spec.arch))
        .collect::<Result<Vec<_>, _>>()?;
    let plans = run_plans(benchmark, thresholds)?;
    // The Secret spec.auth names is a cluster object: locally, the engines require a password
    // made for this run, so the load authenticates as it does in a cluster.
    let password = spec.auth.as_ref().map(|_| run_password()).transpose()?;
    let mut engines = Vec::new();
    // An RDB file at a URL is fetched once for the run, whatever entry asks first, and
    // removed when the run ends.
    let mut fetched_files = crate::client::workloads::rdb_load::FetchedFiles::default();
    for ((engine, program), plan) in spec.engines.iter().zip(&programs).zip(&plans) {
        if stop.requested() {
            break;
        }
        // The entry's run is its plan's: the workload it names (a profile's rebuild from the
        // spec's profile) and its settings.
        let profile = spec
            .workload
            .profile
            .as_ref()
            .map(|p| p.profile())
            .transpose()
            .map_err(|message| BenchError::InvalidArgument {
                field: "spec.workload.profile".into(),
                message,
            })?
            .map(|profile| (profile, "spec.workload.profile".to_string()));
        let workload = plan
            .workload
            .workload(profile)?
            .fetched(&mut fetched_files)?;
        let options = LoadOptions {
            settings: plan.settings.clone(),
            stop: stop.clone(),
            ..LoadOptions::default()
        };
        // Cluster mode's fixed cost needs the same build's empty standalone node beside it.
        let standalone = match engine.is_cluster() {
            true => Some(standalone_used_memory(
                engine,
                program,
                password.as_deref(),
                &options,
            )),
            false => None,
        };
        on_engine(&engine.display_name());
        let started = crate::validation::engine_config::started_entry(engine, spec);
        let servers = start_engines(&started, program, password.as_deref()).and_then(|servers| {
            // A replica's sync: the entry's replica is a second process of its build.
            let replica = plan
                .settings
                .replica
                .map(|_| LocalEngine::start_with_password(&started, program, password.as_deref()))
                .transpose();
            match replica {
                Ok(replica) => Ok((servers, replica)),
                Err(e) => {
                    servers.into_iter().for_each(LocalEngine::stop);
                    Err(BenchError::EngineStart(format!(
                        "the replica for spec.peak.replica did not start: {e}"
                    )))
                }
            }
        });
        let mut report = match servers {
            Ok((servers, replica)) => {
                let addresses: Vec<EngineAddress> =
                    servers.iter().map(|s| s.address.clone()).collect();
                let options = LoadOptions {
                    replica_address: replica.as_ref().map(|r| r.address.clone()),
                    ..options
                };
                let report = measure_shards_journaled(
                    &addresses,
                    &workload,
                    &options,
                    progress,
                    &mut |_| {},
                );
                servers
                    .into_iter()
                    .chain(replica)
                    .for_each(LocalEngine::stop);
                report
            }
            // An engine killed at start by a stop is stopped, not broken.
            Err(e) => {
                let e = stop.check(0).err().unwrap_or(e);
                failed_start_report(engine, &workload, &options, &e)
            }
        };
        report.name = engine.display_name();
        program.record_in(&mut report.engine);
        match (standalone, report.repetitions.first()) {
            (Some(Ok(standalone)), Some(first)) => {
                report.cluster = Some(ClusterCost::per_node(standalone, first));
            }
            (Some(Err(e)), _) => report.warnings.push(format!(
                "the cluster's fixed cost is unknown: the standalone reading failed ({e})"
            )),
            _ => {}
        }
        engines.push(report);
    }
    let medians: Vec<Option<f64>> = engines
        .iter()
        .map(|r| r.summary.as_ref().map(|s| s.bytes_per_item.median))
        .collect();
    let first = medians.first().copied().flatten();
    let change_vs_first_percent = medians
        .iter()
        .map(|m| crate::report::table::change_percent(*m, first))
        .collect();
    Ok(LocalComparison {
        benchmark: benchmark.metadata.name.clone().unwrap_or_default(),
        instance_type: spec
            .instance_types()
            .first()
            .cloned()
            .filter(|t| !t.is_empty()),
        arch: crate::local::engine_store::store_arch_of(spec.arch).to_string(),
        host: HostInfo::current(),
        engines,
        change_vs_first_percent,
    })
}

/// The used_memory of `engine`'s build started empty in standalone mode, read as the cluster
/// node's baseline is: by the measurement itself (the same connection, commands and reading
/// before its first baseline), over a one-key load whose baseline is the figure. An engine's
/// empty used_memory steps up with its first connections and commands (24,688 B at a time on
/// Valkey 9.1), so a reading taken any other way differs by those steps, not by cluster mode.
fn standalone_used_memory(
    engine: &EngineSpec,
    program: &LocalProgram,
    password: Option<&str>,
    options: &LoadOptions,
) -> Result<u64, BenchError> {
    let standalone = EngineSpec {
        cluster_mode: false,
        shards: None,
        ..engine.clone()
    };
    let server = LocalEngine::start_with_password(&standalone, program, password)?;
    let options = LoadOptions {
        settings: RunSettings {
            repetitions: 1,
            settle_seconds: 0,
            ttl: None,
            own_all_slots: false,
            churn: None,
            eviction: None,
            snapshot: None,
            replica: None,
            ..options.settings.clone()
        },
        replica_address: None,
        ..options.clone()
    };
    let one_key = Workload::Strings {
        keys: 1,
        value_size: 1,
    };
    let report = measure_shards_journaled(
        std::slice::from_ref(&server.address),
        &one_key,
        &options,
        &mut |_| {},
        &mut |_| {},
    );
    server.stop();
    match (report.repetitions.first(), report.error) {
        (Some(first), _) => Ok(first.baseline_used_memory),
        (None, Some(error)) => Err(BenchError::EngineStart(error.message)),
        (None, None) => Err(BenchError::EngineStart(
            "the standalone engine measured no repetition".into(),
        )),
    }
}

/// A report for an engine that could not be started: no figures, only the error.
fn failed_start_report(
    engine: &EngineSpec,
    workload: &Workload,
    options: &LoadOptions,
    e: &BenchError,
) -> BenchmarkReport {
    let mut report = BenchmarkReport::nothing_measured(workload, options);
    report.name = engine.display_name();
    report.engine.name = engine.engine.to_string();
    report.engine.version = engine.version.clone();
    report.error = Some(e.into());
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::spec_file::parse_specs;

    #[test]
    fn engines_can_be_picked_by_name_across_documents() {
        let text = "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: a}\nspec:\n  instanceType: x\n  engines: [{engine: redis, version: \"8.2\"}, {engine: valkey, version: \"9.1\", name: v}]\n  workload: {strings: {keys: 10}}\n---\napiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: b}\nspec:\n  instanceType: x\n  engines: [{engine: redis, version: \"7.0\"}]\n  workload: {strings: {keys: 10}}\n";
        let mut specs = parse_specs(text).unwrap();
        select_engines(&mut specs, &["v".into()]).unwrap();
        assert_eq!(specs.len(), 1);
        assert_eq!(specs[0].spec.engines.len(), 1);
        assert_eq!(specs[0].spec.engines[0].display_name(), "v");
        let mut specs = parse_specs(text).unwrap();
        let err = select_engines(&mut specs, &["valkey-9.1".into()]).unwrap_err();
        assert!(
            err.contains("--engine valkey-9.1") && err.contains("redis-8.2, v, redis-7.0"),
            "{err}"
        );
    }

    #[test]
    fn the_listening_socket_of_a_port_is_found_in_the_kernels_table() {
        // /proc/net/tcp as Linux writes it: a socket listening on 127.0.0.1:6379 (0x18EB), one
        // connected from that port, and one listening on another address.
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n   1: 0100007F:18EB 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1\n   2: 0200007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4444 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(listening_inodes(table, 6379), vec!["4242".to_string()]);
        assert!(listening_inodes(table, 6380).is_empty());
    }

    #[test]
    fn a_listener_is_known_as_its_own_process_s_and_no_other_s() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(listens_on(std::process::id(), port));
        // PID 1 does not hold this test's socket.
        assert!(!listens_on(1, port));
        drop(listener);
        assert!(!listens_on(std::process::id(), port));
    }

    #[test]
    fn an_engine_that_could_not_bind_its_port_is_told_from_other_failures() {
        assert!(port_taken(
            "1234:M 06 Dec 2026 10:00:00.000 # Warning: Could not create server TCP listening socket 127.0.0.1:6379: bind: Address already in use"
        ));
        assert!(!port_taken("Fatal error: config file not found"));
    }

    #[test]
    fn persistence_is_off_and_user_args_come_last() {
        let args = server_args(
            EngineKind::Valkey,
            7000,
            Path::new("/tmp/x"),
            &["--maxmemory".into(), "1gb".into()],
        );
        let joined = args.join(" ");
        assert!(joined.contains("--save  --appendonly no"), "{joined}");
        assert_eq!(&args[args.len() - 2..], ["--maxmemory", "1gb"]);
    }
}
