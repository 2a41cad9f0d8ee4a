//! The events of a status change: what changed between the status read and the status
//! written, in order.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::crd::{ConditionReason, EngineState, EngineStatus, MemoryBenchmarkStatus, Phase};

use super::conditions::{ENGINE_POD_CREATED, FAILED, SHARD_PODS_CREATED};
use super::spec_error::SpecError;

/// An event to publish: what changed between the status read and the status written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub warning: bool,
    pub reason: String,
    pub note: String,
}

/// The events of a status change, in order.
pub fn transitions(old: &MemoryBenchmarkStatus, new: &MemoryBenchmarkStatus) -> Vec<Transition> {
    let mut events = Vec::new();
    let normal = |reason: &str, note: String| Transition {
        warning: false,
        reason: reason.into(),
        note,
    };
    let warning = |reason: &str, note: String| Transition {
        warning: true,
        reason: reason.into(),
        note,
    };
    fn invalid(s: &MemoryBenchmarkStatus) -> Option<&Condition> {
        s.conditions
            .iter()
            .find(|c| c.type_ == FAILED && SpecError::is_spec_reason(&c.reason))
    }
    if let Some(refused) = invalid(new) {
        if invalid(old).is_none() {
            events.push(warning(&refused.reason, refused.message.clone()));
        }
        return events;
    }
    for (i, engine) in new.engines.iter().enumerate() {
        let before = old.engines.get(i).filter(|b| b.name == engine.name);
        let was = |f: &dyn Fn(&EngineStatus) -> bool| before.is_some_and(f);
        let n = new.engines.len();
        let who = format!(
            "engine {}/{n} {}{}",
            i + 1,
            engine.name,
            on_type(new, engine)
        );
        if engine.started_at.is_some() && !was(&|b| b.started_at.is_some()) {
            events.push(normal(
                "EngineCreated",
                format!(
                    "{who}: created pod for {}",
                    engine.image.clone().unwrap_or_default()
                ),
            ));
        }
        if engine.reason == Some(ConditionReason::WaitingForNode)
            && !was(&|b| b.reason == Some(ConditionReason::WaitingForNode))
            && engine
                .message
                .as_deref()
                .is_some_and(|m| m != ENGINE_POD_CREATED && m != SHARD_PODS_CREATED)
        {
            events.push(normal(
                ConditionReason::WaitingForNode.as_str(),
                format!("{who}: {}", engine.message.clone().unwrap_or_default()),
            ));
        }
        // Waiting in the node pool's queue, or for the node to pull the image: once, when it
        // begins (the count of benchmarks ahead changes, the reason does not).
        for waiting in [
            ConditionReason::WaitingForFreeNode,
            ConditionReason::ParallelismAboveNodes,
            ConditionReason::ShardsAboveNodes,
            ConditionReason::WaitingForImage,
        ] {
            if engine.reason.as_ref() == Some(&waiting)
                && !was(&|b| b.reason.as_ref() == Some(&waiting))
            {
                events.push(normal(
                    waiting.as_str(),
                    format!("{who}: {}", engine.message.clone().unwrap_or_default()),
                ));
            }
        }
        if engine.state == EngineState::Running && !was(&|b| b.state == EngineState::Running) {
            events.push(normal(
                "EngineReady",
                format!(
                    "{who} is ready on node {}",
                    engine.node_name.clone().unwrap_or_default()
                ),
            ));
        }
        if engine.client_attempts > 1 && !was(&|b| b.client_attempts >= engine.client_attempts) {
            events.push(warning(
                ConditionReason::ClientRetry.as_str(),
                format!("{who}: {}", engine.message.clone().unwrap_or_default()),
            ));
        }
        if engine.state == EngineState::Succeeded && !was(&|b| b.state == EngineState::Succeeded) {
            let figures = engine.summary.as_ref().map_or_else(String::new, |s| {
                format!(
                    ": median {:.1} bytes per item over {} repetitions",
                    s.bytes_per_item.median,
                    engine.repetitions.len()
                )
            });
            events.push(normal("EngineSucceeded", format!("{who}{figures}")));
        }
        if engine.state == EngineState::Failed
            && engine.reason != Some(ConditionReason::NotRun)
            && !was(&|b| b.state == EngineState::Failed)
        {
            events.push(warning(
                engine
                    .reason
                    .as_ref()
                    .map_or("EngineFailed", ConditionReason::as_str),
                format!("{who}: {}", engine.message.clone().unwrap_or_default()),
            ));
        }
    }
    if new.phase != old.phase {
        match new.phase {
            Some(Phase::Succeeded) => events.push(normal(
                "BenchmarkSucceeded",
                new.progress
                    .as_ref()
                    .map(|p| p.summary.clone())
                    .unwrap_or_default(),
            )),
            Some(Phase::Failed) => events.push(warning(
                "BenchmarkFailed",
                new.conditions
                    .iter()
                    .find(|c| c.type_ == FAILED)
                    .map(|c| c.message.clone())
                    .unwrap_or_default(),
            )),
            _ => {}
        }
    }
    events
}

/// " on r7i.4xlarge" for a run of a benchmark of several instance types; nothing otherwise.
fn on_type(status: &MemoryBenchmarkStatus, engine: &EngineStatus) -> String {
    let first = status
        .engines
        .first()
        .and_then(|e| e.instance_type.as_ref());
    let several = status
        .engines
        .iter()
        .any(|e| e.instance_type.as_ref() != first);
    match &engine.instance_type {
        Some(t) if several => format!(" on {t}"),
        _ => String::new(),
    }
}
