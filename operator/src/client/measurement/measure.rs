//! The measurement protocol, per engine and per repetition: `FLUSHALL SYNC`, confirm the
//! server is empty, wait until the control connection is the engine's only client, read
//! `INFO memory` as the baseline, load over one pipelined connection, time it, verify the
//! count in the engine, wait again until the control connection is the only client, read
//! `INFO memory` again. Bytes per item is (used_memory after - baseline) / verified count;
//! nothing is computed from an unverified count. Both readings count the control
//! connection and nothing else, so what separates them is the data.
//!
//! A sharded cluster (several addresses) is joined first (`client::connection::shards`); then every step
//! above is taken on every shard, the load goes over one pipelined connection per shard (each
//! batch split by the owner of each key's slot, through the same loop and window), and the
//! figures are the sums over the shards, each shard's kept beside them. A `MOVED` or `ASK`
//! reply is `SlotMoved`; an error about one shard names it.
//!
//! A failure stops the run but never loses what was measured: the report keeps every finished
//! repetition, what is known of the one that failed, and the error. An engine that goes away
//! once it has answered is `ConnectionLost`, with what was sent, wherever the run was; a
//! [`StopRequest`] (the client pod's SIGTERM) ends the run between two batches the same way.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub use crate::client::measurement::load_options::{DEFAULT_OTHER_CLIENTS_TIMEOUT, LoadOptions};
pub use crate::client::measurement::measured::{
    BenchmarkReport, ClusterCost, ErrorReport, FailedPhase, FailedRepetition, MemorySample,
    RepetitionResult, SettledMemory, ShardReading, ShardSpread, Summary, WorkloadReport,
};

use crate::client::connection::engine::{ControlConnection, EngineAddress, EngineInfo, MemoryInfo};
use crate::client::connection::resp::CommandBuffer;
use crate::client::connection::shards::{
    JOIN_TIMEOUT, LoadConnections, LoadFailure, ShardSet, check_shard_count, shard_name,
    total_memory,
};
use crate::client::connection::slots::redirected_slot;
use crate::client::connection::stop_request::StopRequest;
use crate::client::phases::{self, PhaseContext, PhaseFailure};
use crate::client::workloads::rdb_load::RdbTarget;
use crate::client::workloads::type_memory;
use crate::client::workloads::workload::Workload;
use crate::error::BenchError;

/// Progress is reported after the first batch to reach every this many commands, and at the
/// end: often enough for a bar, rare enough to cost nothing per batch at pipeline 1.
const PROGRESS_EVERY: u64 = 1 << 14;

/// How often the client count is read while waiting for other clients to leave.
const CLIENT_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Waits until the control connection is the engine's only client, so that no other
/// connection's buffers (a readiness probe, the operator's progress reading, the load
/// connection the server has not closed yet, a stray client) land in a memory reading. Fails
/// with `OtherClientsConnected`, naming the others, when that does not happen within
/// `timeout`. `reading` says which reading it guards (`baseline` or `final`).
pub fn wait_until_sole_client(
    control: &mut ControlConnection,
    address: &EngineAddress,
    timeout: Duration,
    reading: &'static str,
    stop: &StopRequest,
) -> Result<(), BenchError> {
    let started = Instant::now();
    loop {
        stop.check(0)?;
        let clients = control.connected_clients()?;
        if clients <= 1 {
            return Ok(());
        }
        if started.elapsed() >= timeout {
            let mut others = control.other_clients();
            let listed = others.len();
            others.truncate(3);
            let mut clients_text = others.join("; ");
            if listed > others.len() {
                clients_text.push_str(&format!("; and {} more", listed - others.len()));
            }
            if clients_text.is_empty() {
                clients_text = "CLIENT LIST did not name them".into();
            }
            return Err(BenchError::OtherClientsConnected {
                address: address.to_string(),
                count: clients - 1,
                waited_seconds: started.elapsed().as_secs_f64(),
                reading,
                clients: clients_text,
            });
        }
        std::thread::sleep(CLIENT_POLL_INTERVAL);
    }
}

/// Where a load stands, for progress bars and status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadProgress {
    /// Counted from 1.
    pub repetition: u32,
    pub repetitions: u32,
    pub commands_done: u64,
    pub commands_total: u64,
}

impl BenchmarkReport {
    /// A report of a run that has measured nothing yet.
    pub fn nothing_measured(workload: &Workload, options: &LoadOptions) -> Self {
        Self {
            name: String::new(),
            engine: EngineInfo::default(),
            workload: workload.into(),
            pipeline: options.settings.pipeline,
            cluster: None,
            ttl: options.settings.ttl,
            repetitions_requested: options.settings.repetitions,
            repetitions: Vec::new(),
            failed_repetition: None,
            summary: None,
            warnings: Vec::new(),
            error: None,
        }
    }
}

/// Measures one engine: every repetition of the workload, then the summary. Always returns a
/// report; on failure it holds what was measured before, and `error`.
pub fn measure(
    address: &EngineAddress,
    workload: &Workload,
    options: &LoadOptions,
    progress: &mut dyn FnMut(LoadProgress),
) -> BenchmarkReport {
    measure_journaled(address, workload, options, progress, &mut |_| {})
}

/// [`measure`], handing `journal` the report as it stands after the engine identified itself
/// and after each finished repetition, so that a client that must leave before the run returns
/// (its grace period ending) still has everything measured so far to write.
pub fn measure_journaled(
    address: &EngineAddress,
    workload: &Workload,
    options: &LoadOptions,
    progress: &mut dyn FnMut(LoadProgress),
    journal: &mut dyn FnMut(&BenchmarkReport),
) -> BenchmarkReport {
    measure_shards_journaled(
        std::slice::from_ref(address),
        workload,
        options,
        progress,
        journal,
    )
}

/// [`measure_journaled`] of one engine (one address) or of a sharded cluster (2 to
/// [`MAX_SHARDS`](crate::client::connection::shards::MAX_SHARDS) addresses, shard i at the i-th): the
/// shards are joined into one cluster before the first baseline, every reading is taken on
/// every shard and summed, and the load goes over one pipelined connection per shard.
pub fn measure_shards_journaled(
    addresses: &[EngineAddress],
    workload: &Workload,
    options: &LoadOptions,
    progress: &mut dyn FnMut(LoadProgress),
    journal: &mut dyn FnMut(&BenchmarkReport),
) -> BenchmarkReport {
    let mut report = BenchmarkReport::nothing_measured(workload, options);
    if let Err(e) = options
        .validate()
        .and_then(|_| workload.validate())
        .and_then(|_| phases::check_workload(workload, options))
        .and_then(|_| check_shard_count(addresses.len()))
        .and_then(|_| phases::check_addresses(addresses, workload, options))
    {
        report.error = Some((&e).into());
        return report;
    }
    let mut shards = match ShardSet::open(addresses, options.settings.connect_timeout) {
        Ok(shards) => shards,
        Err(e) => {
            report.error = Some((&e).into());
            return report;
        }
    };
    if let Err(e) = prepare(&mut shards, options, &mut report) {
        report.error = Some((&e).into());
        return report;
    }
    // An rdb load writes what the engine's commands can restore, measured from the engine.
    let for_target;
    let workload = match workload {
        Workload::Rdb(load) => {
            for_target = Workload::Rdb(load.for_target(RdbTarget::measure(shards.first())));
            report.workload = (&for_target).into();
            &for_target
        }
        other => other,
    };
    if let Workload::Rdb(load) = workload {
        // Before any write: a file that cannot fit, or whose databases a cluster lacks.
        if let Err(e) = load.check_fits(report.engine.maxmemory, shards.shards().len()) {
            report.error = Some((&e).into());
            return report;
        }
        // What the file holds that the load does not write, said beside the figures.
        let left_out = load.scan.left_out(&load.target.unwrap_or_default());
        if !left_out.is_empty() {
            report
                .warnings
                .push(format!("{}: {left_out}", load.place()));
        }
    }
    journal(&report);
    for repetition in 1..=options.settings.repetitions {
        let mut state = RepetitionState {
            repetition,
            sent: 0,
            baseline: None,
            control_at_baseline: Vec::new(),
            samples: Vec::new(),
        };
        let outcome = run_repetition(
            &mut shards,
            workload,
            options,
            &report.engine,
            &mut state,
            progress,
        );
        match outcome {
            Ok((result, None)) => {
                report.repetitions.push(result);
                report.summary = Summary::of(&report.repetitions, &options.settings.thresholds);
                journal(&report);
            }
            Ok((result, Some(PhaseFailure { phase, error }))) => {
                // The repetition's readings (and the phases before this one) stand: it is kept,
                // and the run ends with the phase named.
                let error = ended_by(&options.stop, error, result.items);
                report.repetitions.push(result);
                report.error = Some(ErrorReport {
                    category: error.kind(),
                    message: format!(
                        "the {phase} phase after repetition {repetition}'s readings failed (the repetition's figures are kept): {error}"
                    ),
                    phase: Some(FailedPhase {
                        name: phase,
                        repetition,
                    }),
                });
                break;
            }
            Err(error) => {
                let error = ended_by(&options.stop, error, state.sent);
                report.failed_repetition = Some(state.partial(&mut shards));
                report.error = Some((&error).into());
                break;
            }
        }
    }
    report.summary = Summary::of(&report.repetitions, &options.settings.thresholds);
    report
        .warnings
        .extend(phases::warnings(&report.repetitions, options));
    report
}

/// What ended a repetition after `sent` items. Asked to stop: whatever ended it (a command the
/// signal interrupted, the check between batches) ends it because of the stop. Otherwise, an
/// engine that answered before and cannot be reached now went away.
fn ended_by(stop: &StopRequest, error: BenchError, sent: u64) -> BenchError {
    match stop.behind(&error) {
        Some(cause) => BenchError::Stopped {
            items_sent: sent,
            cause,
        },
        None => error.after_connected(sent),
    }
}

/// Before the first repetition: who the engine is (shard 0 for a cluster, whose shards must
/// all run the same engine and version), the cluster made (one node owning every slot, or the
/// shards joined), the settings read back, and a server that holds keys refused when asked.
fn prepare(
    shards: &mut ShardSet,
    options: &LoadOptions,
    report: &mut BenchmarkReport,
) -> Result<(), BenchError> {
    let mut info = shards.first().identify()?;
    if shards.is_sharded() {
        let identities = shards.each(|control, _| control.identify())?;
        if let Some((index, other)) = identities
            .iter()
            .enumerate()
            .find(|(_, other)| (&other.name, &other.version) != (&info.name, &info.version))
        {
            return Err(BenchError::EngineStart(format!(
                "{} runs {} {}, but shard 0 runs {} {}: every shard of a cluster must run the same engine and version",
                shard_name(index, &shards.shards()[index].address),
                other.name,
                other.version,
                info.name,
                info.version
            )));
        }
        shards.join(JOIN_TIMEOUT)?;
    } else if options.settings.own_all_slots {
        shards.first().own_all_slots()?;
    }
    if shards.is_sharded() || options.settings.own_all_slots {
        // Only of the cluster the client made: a command a standalone engine refuses still
        // raises its used_memory by a step (24 KiB on Valkey 7.2) before its baseline.
        info.cluster = shards.first().cluster_node_state();
    }
    shards
        .first()
        .read_config(&options.settings.read_config, &mut info);
    phases::check_engine(shards, &info, options)?;
    report.warnings = info.warnings();
    report.name = format!("{}-{}", info.name, info.version);
    report.engine = info;
    if options.settings.refuse_existing_keys {
        let held = shards.each(|control, _| control.keys_in_all_databases())?;
        if let Some(index) = held.iter().position(|keys| *keys > 0) {
            return Err(BenchError::ServerNotEmpty {
                address: shards.shards()[index].address.to_string(),
                keys: held.iter().sum(),
            });
        }
    }
    Ok(())
}

/// What is known of the repetition under way, kept outside it so that a failure anywhere in it
/// still reports how far it got.
struct RepetitionState {
    repetition: u32,
    /// Commands sent (and answered) so far.
    sent: u64,
    baseline: Option<MemoryInfo>,
    /// What each shard held for its control connection when the baseline was read.
    control_at_baseline: Vec<u64>,
    samples: Vec<MemorySample>,
}

impl RepetitionState {
    /// What is known of the repetition that failed. used_memory is read if the engine (every
    /// shard) still answers (it may have gone, which is often why the repetition failed).
    fn partial(&mut self, shards: &mut ShardSet) -> FailedRepetition {
        FailedRepetition {
            repetition: self.repetition,
            commands_sent: self.sent,
            baseline_used_memory: self.baseline.as_ref().map(|b| b.used_memory),
            used_memory: shards.memory().ok().map(|m| total_memory(&m).used_memory),
            samples: std::mem::take(&mut self.samples),
        }
    }
}

/// The result of the load itself, before verification.
struct LoadOutcome {
    seconds: f64,
    /// The workload's integer replies (those of its EXPIREs left out).
    integer_replies: u64,
    distinct_sent: Option<u64>,
    /// EXPIRE commands sent after writes.
    expires_sent: u64,
    /// Distinct random keys sent with a TTL, when counted exactly.
    distinct_with_ttl: Option<u64>,
    /// When the first write went out: a TTL counts from there.
    first_write: Instant,
    /// used_memory before the first command and after each type's last one (a profile's
    /// rebuild; empty otherwise).
    type_readings: Vec<type_memory::TypeReading>,
}

fn run_repetition(
    shards: &mut ShardSet,
    workload: &Workload,
    options: &LoadOptions,
    engine: &EngineInfo,
    state: &mut RepetitionState,
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<(RepetitionResult, Option<PhaseFailure>), BenchError> {
    options.stop.check(0)?;
    shards.each(|control, _| control.flush_all())?;
    let leftover = shards.each(|control, _| control.dbsize())?;
    if let Some(index) = leftover.iter().position(|keys| *keys != 0) {
        let at = if shards.is_sharded() {
            format!(" ({})", shard_name(index, &shards.shards()[index].address))
        } else {
            String::new()
        };
        return Err(BenchError::CountMismatch {
            message: format!(
                "the server{at} still holds {} keys after FLUSHALL; is another client writing to it?",
                leftover[index]
            ),
        });
    }
    let sole_client = |shards: &mut ShardSet, reading| {
        shards.each(|control, address| {
            wait_until_sole_client(
                control,
                address,
                options.settings.other_clients_timeout,
                reading,
                &options.stop,
            )
        })
    };
    sole_client(shards, "baseline")?;
    let (baselines, control_at_baseline) = shards.baseline_memory()?;
    state.control_at_baseline = control_at_baseline.clone();
    let baseline = total_memory(&baselines);
    state.baseline = Some(baseline.clone());

    let outcome = load(shards, workload, options, state, progress)?;
    let verified = workload.verify(shards, outcome.integer_replies, outcome.distinct_sent)?;
    let keys_with_ttl = match options.settings.ttl {
        Some(ttl) => Some(workload.verify_ttl(shards, &ttl, outcome.distinct_with_ttl)?),
        None => None,
    };
    // The load connection is closed by now, but the server may not have let go of it yet.
    sole_client(shards, "final")?;
    let finals = shards.data_memory(&control_at_baseline)?;
    let after = total_memory(&finals);
    let shard_readings = if shards.is_sharded() {
        let keys = shards.each(|control, _| control.dbsize())?;
        shards
            .shards()
            .iter()
            .zip(baselines.iter().zip(&finals).zip(keys))
            .enumerate()
            .map(|(index, (shard, ((baseline, after), keys)))| ShardReading {
                shard: index as u32,
                address: shard.address.to_string(),
                baseline_used_memory: baseline.used_memory,
                used_memory: after.used_memory,
                keys,
            })
            .collect()
    } else {
        Vec::new()
    };
    let bytes_per_item = |m: &MemoryInfo| {
        (m.used_memory as f64 - baseline.used_memory as f64) / verified.items as f64
    };
    let settled = if options.settings.settle_seconds > 0 {
        options.stop.sleep(Duration::from_secs(u64::from(
            options.settings.settle_seconds,
        )))?;
        sole_client(shards, "settled")?;
        let m = total_memory(&shards.data_memory(&control_at_baseline)?);
        Some(SettledMemory {
            after_seconds: options.settings.settle_seconds,
            used_memory: m.used_memory,
            used_memory_rss: m.used_memory_rss,
            bytes_per_item: bytes_per_item(&m),
        })
    } else {
        None
    };
    if let Some(ttl) = options.settings.ttl {
        // Readings taken after the first keys could have expired would count fewer keys than
        // were verified: the repetition fails rather than report such a figure.
        let elapsed = outcome.first_write.elapsed().as_secs_f64();
        if elapsed >= f64::from(ttl.seconds) {
            return Err(BenchError::TtlTooShort {
                ttl_seconds: ttl.seconds,
                elapsed_seconds: elapsed,
            });
        }
    }
    // The phases after the readings, in order, on the data the repetition loaded; each of
    // their readings waits until the control connection is the engine's only client and
    // counts connections as at the baseline, as the load's readings do.
    let mut read = |shards: &mut ShardSet, reading: &'static str| {
        sole_client(shards, reading)?;
        Ok(total_memory(&shards.data_memory(&control_at_baseline)?))
    };
    let commands = workload.commands() + outcome.expires_sent;
    let mut result = RepetitionResult {
        repetition: state.repetition,
        baseline_used_memory: baseline.used_memory,
        baseline_used_memory_rss: baseline.used_memory_rss,
        used_memory: after.used_memory,
        used_memory_rss: after.used_memory_rss,
        used_memory_dataset: after.used_memory_dataset,
        mem_fragmentation_ratio: after.mem_fragmentation_ratio,
        items: verified.items,
        bytes_per_item: bytes_per_item(&after),
        commands_per_sec: commands as f64 / outcome.seconds,
        items_per_sec: verified.items as f64 / outcome.seconds,
        commands,
        seconds: outcome.seconds,
        encoding: verified.encoding,
        expected_unique_items: verified.expected_unique,
        keys_with_ttl,
        settled,
        samples: std::mem::take(&mut state.samples),
        shards: shard_readings,
        by_type: type_memory::of_readings(&workload.type_segments(), &outcome.type_readings),
        // Each phase puts its own result here when it is done (`client::phases`).
        peak: None,
        churn: None,
        eviction: None,
    };
    let mut context = PhaseContext {
        shards,
        workload,
        options,
        engine,
        items: verified.items,
        bytes_per_item: bytes_per_item(&after),
        read: &mut read,
    };
    let failed = phases::after_readings(&mut context, &mut result);
    Ok((result, failed))
}

/// Batches larger than this go one at a time, whatever `batches_in_flight` says: the replies to
/// what is in flight then always fit the socket buffers, so a send can never wait on an engine
/// that waits on the client to read.
pub const EARLY_BATCH_BYTES: usize = 64 * 1024;

/// A batch sent and not yet answered: its commands (the workload's), its bytes, and the
/// replies each shard owes for it (an EXPIRE after a write gets a reply of its own).
struct InFlight {
    commands: u64,
    bytes: usize,
    owed: Vec<usize>,
}

/// Whether a batch of `bytes` may be sent now, with `in_flight` batches unanswered.
fn may_send_early(in_flight: &VecDeque<InFlight>, bytes: usize, window: u32) -> bool {
    if in_flight.is_empty() {
        return true;
    }
    let queued: usize = in_flight.iter().map(|batch| batch.bytes).sum();
    in_flight.len() < window as usize && queued + bytes <= EARLY_BATCH_BYTES
}

/// The error of an error reply to the load: a redirection (`MOVED`, `ASK`) names its slot and
/// the shard that sent it; anything else is classified as for one engine.
fn load_reply_error(
    workload: &Workload,
    connections: &LoadConnections,
    reply: String,
    shard: usize,
    sent: u64,
) -> BenchError {
    let address = connections.address(shard);
    match redirected_slot(&reply) {
        Some((redirection, slot, target)) => BenchError::SlotMoved {
            redirection: redirection.to_string(),
            slot,
            shard: shard_name(shard, address),
            target,
        },
        None => BenchError::from_load_reply(workload.command_name(), reply, sent, address),
    }
}

/// Sends the workload over fresh connections (one per shard) in batches of `pipeline`
/// commands, each batch split over the shards by the owner of each command's key. Memory
/// samples are read on the control connections between batches, and their time is not
/// counted as load time.
fn load(
    shards: &mut ShardSet,
    workload: &Workload,
    options: &LoadOptions,
    state: &mut RepetitionState,
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<LoadOutcome, BenchError> {
    let repetition = state.repetition;
    let sent = &mut state.sent;
    let samples = &mut state.samples;
    let mut connections = LoadConnections::connect(shards, options.settings.connect_timeout)?;
    let lost = |connections: &LoadConnections, sent: u64, failure: LoadFailure| {
        BenchError::ConnectionLost {
            items_sent: sent,
            detail: connections.describe(&failure),
        }
    };

    let total = workload.commands();
    let per_item = workload.commands_per_item();
    let sample_every = workload.sample_every().saturating_mul(per_item);
    let type_ends: Vec<u64> = workload
        .type_segments()
        .iter()
        .map(|t| t.commands_end)
        .collect();
    // The next reading after `point`: a growth-curve sample or the end of a type.
    let reading_after = |point: u64| {
        let sample = point
            .checked_div(sample_every)
            .map_or(u64::MAX, |n| (n + 1).saturating_mul(sample_every));
        let type_end = type_ends.iter().copied().find(|end| *end > point);
        type_end.map_or(sample, |end| end.min(sample))
    };
    let mut next_sample = reading_after(0);
    // A reading during the load is the data's (`ShardSet::data_memory`): without what the
    // engine holds for the load connections, and with the control connections as they were
    // at the baseline, so that growth above the baseline is the data's alone.
    let control_at_baseline = std::mem::take(&mut state.control_at_baseline);
    let data_memory = |shards: &mut ShardSet| {
        Ok::<u64, BenchError>(total_memory(&shards.data_memory(&control_at_baseline)?).used_memory)
    };
    let mut type_readings = Vec::new();
    if !type_ends.is_empty() {
        type_readings.push(type_memory::reading(shards, data_memory)?);
    }
    let mut encoder = workload.encoder_with_ttl(options.settings.ttl);
    let mut integer_replies = 0u64;
    let mut paused = Duration::ZERO;
    let mut next_progress = PROGRESS_EVERY;
    // Two buffers: the next batch is encoded while the engine works on the one just sent, so
    // the client's own work overlaps the engine's instead of adding to it. Up to
    // `batches_in_flight` batches are sent before the first one's replies are read (small
    // batches only: their replies can never fill the socket buffers while a send waits).
    let mut buffer = CommandBuffer::with_capacity(64 * 1024);
    let mut next = CommandBuffer::with_capacity(64 * 1024);
    let batch_after = |done: u64, next_sample: u64| {
        u64::from(options.settings.pipeline)
            .min(total - done)
            .min(next_sample - done)
    };
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    // The owed-replies vectors of answered batches, reused by the next ones.
    let mut spare_owed: Vec<Vec<usize>> = Vec::new();
    let mut dispatched = 0u64;
    let mut batch = batch_after(0, next_sample);
    let mut replies = 0usize;
    for index in 0..batch {
        replies += encoder.encode(index, &mut buffer);
    }
    let started = Instant::now();
    loop {
        // Send while the window has room; a memory sample waits until every command before it
        // is answered and nothing after it is sent.
        while batch > 0
            && dispatched != next_sample
            && may_send_early(
                &in_flight,
                buffer.as_bytes().len(),
                options.settings.batches_in_flight,
            )
        {
            options.stop.check(*sent)?;
            let mut owed = spare_owed.pop().unwrap_or_default();
            connections
                .send(&buffer, replies, &mut owed)
                .map_err(|f| lost(&connections, *sent, f))?;
            in_flight.push_back(InFlight {
                commands: batch,
                bytes: buffer.as_bytes().len(),
                owed,
            });
            dispatched += batch;
            let upcoming = if dispatched < total {
                let boundary = if dispatched == next_sample {
                    reading_after(next_sample)
                } else {
                    next_sample
                };
                batch_after(dispatched, boundary)
            } else {
                0
            };
            next.clear();
            replies = 0;
            for index in dispatched..dispatched + upcoming {
                replies += encoder.encode(index, &mut next);
            }
            std::mem::swap(&mut buffer, &mut next);
            batch = upcoming;
        }
        let Some(answered) = in_flight.pop_front() else {
            break;
        };
        let (tally, error_shard) = connections
            .read(&answered.owed)
            .map_err(|f| lost(&connections, *sent, f))?;
        *sent += answered.commands;
        spare_owed.push(answered.owed);
        if let Some(reply) = tally.first_error {
            return Err(load_reply_error(
                workload,
                &connections,
                reply,
                error_shard,
                *sent,
            ));
        }
        integer_replies += tally.integer_sum;
        if *sent == next_sample {
            let pause = Instant::now();
            // A type's end is read once a rehash under way has finished (`type_memory`).
            let used_memory = if type_ends.contains(sent) {
                let reading = type_memory::reading(shards, data_memory)?;
                type_readings.push(reading);
                reading.used_memory
            } else {
                data_memory(shards)?
            };
            if sample_every > 0 && sent.is_multiple_of(sample_every) {
                samples.push(MemorySample {
                    items: *sent / per_item,
                    used_memory,
                });
            }
            next_sample = reading_after(next_sample);
            paused += pause.elapsed();
        }
        if *sent >= next_progress || *sent == total {
            progress(LoadProgress {
                repetition,
                repetitions: options.settings.repetitions,
                commands_done: *sent,
                commands_total: total,
            });
            next_progress = *sent + PROGRESS_EVERY;
        }
    }
    let seconds = (started.elapsed() - paused).as_secs_f64().max(1e-9);
    Ok(LoadOutcome {
        seconds,
        integer_replies: integer_replies - encoder.expires_sent(),
        distinct_sent: encoder.distinct_sent(),
        expires_sent: encoder.expires_sent(),
        distinct_with_ttl: encoder.distinct_with_ttl(),
        first_write: started,
        type_readings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_go_early_only_within_the_window_and_the_byte_bound() {
        let mut in_flight = VecDeque::new();
        let batch = |bytes| InFlight {
            commands: 100,
            bytes,
            owed: vec![100],
        };
        // Nothing in flight: any batch goes, however large.
        assert!(may_send_early(&in_flight, 10 * EARLY_BATCH_BYTES, 1));
        in_flight.push_back(batch(4_000));
        assert!(
            !may_send_early(&in_flight, 4_000, 1),
            "one in flight is the window"
        );
        assert!(may_send_early(&in_flight, 4_000, 2));
        in_flight.push_back(batch(4_000));
        assert!(!may_send_early(&in_flight, 4_000, 2));
        assert!(may_send_early(&in_flight, 4_000, 8));
        assert!(
            !may_send_early(&in_flight, EARLY_BATCH_BYTES - 4_000, 8),
            "what is in flight stays within the byte bound"
        );
    }
}
