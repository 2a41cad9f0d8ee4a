//! What the status says about the whole benchmark, derived from the engines' states: phase,
//! progress, the best engine, each engine's change against the first and its cluster's fixed
//! cost ([`super::cluster_cost`]), the capacity plan
//! (`crate::capacity::status`) and the conditions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::crd::{
    ConditionReason, EngineState, EngineStatus, MemoryBenchmark, MemoryBenchmarkStatus, Phase,
    Progress,
};

use super::conditions::{ConditionStamp, FAILED, PROGRESSING, READY};
use super::engine_run::EngineRun;
use super::observation::{LoadProbe, current_engine, is_terminal};

/// The end of progress's note of how many engines run at once: " (4 engines under way at once)".
const AT_ONCE: &str = " engines under way at once)";

/// Phase, progress, the best engine, changes against the first engine, and conditions, all
/// derived from the engines' states.
pub(super) fn summarize(
    status: &mut MemoryBenchmarkStatus,
    benchmark: &MemoryBenchmark,
    now: Timestamp,
    load: Option<LoadProbe>,
    old: &MemoryBenchmarkStatus,
    prices: Option<&Result<crate::capacity::Prices, String>>,
) {
    let spec = &benchmark.spec;
    let n = status.engines.len() as u32;
    // Each run is compared with the first engine on its own instance type.
    let firsts: Vec<Option<f64>> = (0..status.engines.len())
        .map(|i| {
            let first = i - spec.entry_of_run(i);
            status.engines[first]
                .summary
                .as_ref()
                .map(|s| s.bytes_per_item.median)
        })
        .collect();
    for (engine, first) in status.engines.iter_mut().zip(firsts) {
        let median = engine.summary.as_ref().map(|s| s.bytes_per_item.median);
        engine.change_vs_first_percent = crate::report::table::change_percent(median, first);
    }
    super::cluster_cost::cluster_fixed_costs(status, spec);
    let several_types = spec.instance_types().len() > 1;
    let best = status
        .engines
        .iter()
        .filter_map(|e| {
            e.summary
                .as_ref()
                .map(|s| (s.bytes_per_item.median, run_name(e, several_types)))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0));
    status.best_bytes_per_item = best.as_ref().map(|b| (b.0 * 10.0).round() / 10.0);
    status.best_engine = best.map(|b| b.1);
    status.capacity = crate::capacity::status::status_of(benchmark, &status.engines, prices);

    let succeeded = status
        .engines
        .iter()
        .filter(|e| e.state == EngineState::Succeeded)
        .count() as u32;
    let stamp = ConditionStamp {
        generation: benchmark.metadata.generation,
        now,
    };
    match current_engine(status) {
        None => {
            let all_succeeded = succeeded == n;
            status.phase = Some(if all_succeeded {
                Phase::Succeeded
            } else {
                Phase::Failed
            });
            status.finished_at.get_or_insert(Time(now));
            status.progress = Some(Progress {
                engine: n,
                engines: n,
                repetition: spec.repetitions,
                repetitions: spec.repetitions,
                summary: if all_succeeded {
                    format!("done: {n}/{n} engines")
                } else {
                    format!("failed: {succeeded}/{n} engines measured")
                },
            });
            if all_succeeded {
                let message = format!("{n} of {n} engines measured");
                stamp.set(
                    &mut status.conditions,
                    READY,
                    "True",
                    ConditionReason::Completed,
                    &message,
                );
                stamp.set(
                    &mut status.conditions,
                    PROGRESSING,
                    "False",
                    ConditionReason::Completed,
                    &message,
                );
                stamp.set(
                    &mut status.conditions,
                    FAILED,
                    "False",
                    ConditionReason::NoFailure,
                    "",
                );
            } else {
                let failures: Vec<&EngineStatus> = status
                    .engines
                    .iter()
                    .filter(|e| {
                        e.state == EngineState::Failed && e.reason != Some(ConditionReason::NotRun)
                    })
                    .collect();
                let why = failures
                    .first()
                    .and_then(|e| e.reason.clone())
                    .unwrap_or(ConditionReason::NotRun);
                let message = format!(
                    "{succeeded} of {n} engines measured; {}",
                    failures
                        .iter()
                        .map(|e| format!(
                            "{}: {}",
                            e.name,
                            e.message.clone().unwrap_or_else(|| e
                                .reason
                                .as_ref()
                                .map(|r| r.to_string())
                                .unwrap_or_default())
                        ))
                        .collect::<Vec<_>>()
                        .join("; ")
                );
                stamp.set(
                    &mut status.conditions,
                    READY,
                    "False",
                    why.clone(),
                    &message,
                );
                stamp.set(
                    &mut status.conditions,
                    PROGRESSING,
                    "False",
                    why.clone(),
                    &message,
                );
                stamp.set(&mut status.conditions, FAILED, "True", why, &message);
            }
        }
        Some(index) => {
            let under_way = status
                .engines
                .iter()
                .filter(|e| e.state == EngineState::Running)
                .count();
            let current = EngineRun::new(status, index);
            let started =
                current.engine().state == EngineState::Running || index > 0 || under_way > 0;
            let mut progress = running_progress(&current, spec, load, old);
            status.phase = Some(if started {
                Phase::Running
            } else {
                Phase::Pending
            });
            status.finished_at = None;
            let at_once = if under_way > 1 {
                format!(" ({under_way}{AT_ONCE}")
            } else {
                String::new()
            };
            // A progress kept from the last reading already carries the count: replace it.
            if progress.summary.ends_with(AT_ONCE)
                && let Some(start) = progress.summary.rfind(" (")
            {
                progress.summary.truncate(start);
            }
            progress.summary.push_str(&at_once);
            // A run that waits because the pool has fewer nodes than spec.parallelism (or its
            // shards) says so in the condition, whichever run is first.
            let index = status
                .engines
                .iter()
                .position(|e| {
                    !is_terminal(e)
                        && matches!(
                            e.reason,
                            Some(
                                ConditionReason::ParallelismAboveNodes
                                    | ConditionReason::ShardsAboveNodes
                            )
                        )
                })
                .unwrap_or(index);
            let shown = EngineRun::new(status, index);
            let engine = shown.engine();
            let why = engine.reason.clone().unwrap_or(ConditionReason::InProgress);
            let node = engine
                .node_name
                .as_ref()
                .map(|n| format!(" on node {n}"))
                .unwrap_or_default();
            let who = run_name(engine, several_types);
            let message = match &engine.message {
                Some(m) => format!("engine {}/{n} ({who}){node}{at_once}: {m}", index + 1),
                None => format!("engine {}/{n} ({who}){node}{at_once}", index + 1),
            };
            status.progress = Some(progress);
            stamp.set(
                &mut status.conditions,
                READY,
                "False",
                ConditionReason::InProgress,
                &format!("{succeeded} of {n} engines measured"),
            );
            stamp.set(&mut status.conditions, PROGRESSING, "True", why, &message);
            stamp.set(
                &mut status.conditions,
                FAILED,
                "False",
                ConditionReason::NoFailure,
                "",
            );
        }
    }
}

fn running_progress(
    run: &EngineRun<'_>,
    spec: &crate::crd::MemoryBenchmarkSpec,
    load: Option<LoadProbe>,
    old: &MemoryBenchmarkStatus,
) -> Progress {
    let index = run.index();
    let n = run.status().engines.len() as u32;
    let engine = run.engine();
    let k = spec.repetitions;
    let head = format!(
        "{}/{n} {}",
        index + 1,
        run_name(engine, spec.instance_types().len() > 1)
    );
    let measuring = engine.reason == Some(ConditionReason::Measuring);
    match (measuring, load) {
        (true, Some(probe)) => {
            let repetition = probe.repetitions_begun.unwrap_or(0).min(k);
            let loaded = probe
                .loaded_percent
                .map(|percent| format!(", {}% loaded", percent.min(100)))
                .unwrap_or_default();
            Progress {
                engine: index as u32 + 1,
                engines: n,
                repetition,
                repetitions: k,
                summary: format!("{head}: rep {repetition}/{k}{loaded}"),
            }
        }
        (true, None) => match &old.progress {
            // No fresh reading: keep the last one rather than flap.
            Some(p) if p.engine == index as u32 + 1 => p.clone(),
            _ => Progress {
                engine: index as u32 + 1,
                engines: n,
                repetition: 0,
                repetitions: k,
                summary: format!("{head}: measuring"),
            },
        },
        (false, _) if engine.reason == Some(ConditionReason::StoppingClient) => {
            match &old.progress {
                // The last reading stays: it is what is known of a client that may not answer.
                Some(p) if p.engine == index as u32 + 1 => p.clone(),
                _ => Progress {
                    engine: index as u32 + 1,
                    engines: n,
                    repetition: 0,
                    repetitions: k,
                    summary: format!("{head}: stopping the client"),
                },
            }
        }
        (false, _) => {
            let what = match engine.reason {
                Some(ConditionReason::WaitingForNode) => "waiting for a node",
                // "waiting for a free r8g.4xlarge node, 1 benchmark ahead"
                Some(ConditionReason::WaitingForFreeNode) => engine
                    .message
                    .as_deref()
                    .unwrap_or("waiting for a free node"),
                Some(ConditionReason::WaitingForImage) => "waiting for the image",
                Some(ConditionReason::EngineStarting) => "engine starting",
                Some(ConditionReason::ClientStarting) => "client starting",
                _ => "starting",
            };
            Progress {
                engine: index as u32 + 1,
                engines: n,
                repetition: 0,
                repetitions: k,
                summary: format!("{head}: {what}"),
            }
        }
    }
}

/// A run's name: the engine's, and its instance type when the benchmark has several
/// (`valkey-9.1.2 on r8g.4xlarge`).
fn run_name(engine: &EngineStatus, several_types: bool) -> String {
    match &engine.instance_type {
        Some(t) if several_types => format!("{} on {t}", engine.name),
        _ => engine.name.clone(),
    }
}
