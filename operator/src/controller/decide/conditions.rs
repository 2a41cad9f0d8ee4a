//! The benchmark's condition types, and how a condition is set (its reason is a
//! [`ConditionReason`]; (its lastTransitionTime changes only when its status flips).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::crd::ConditionReason;

/// The engine's message once its pods are created, before the scheduler has said anything:
/// not worth an event of its own (`EngineCreated` says it).
pub const ENGINE_POD_CREATED: &str = "the engine pod was created";
pub const SHARD_PODS_CREATED: &str = "the engine pods were created, one per shard";

/// Condition types.
pub const READY: &str = "Ready";
pub const PROGRESSING: &str = "Progressing";
pub const FAILED: &str = "Failed";

/// Sets a condition; its lastTransitionTime changes only when its status flips.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    value: &str,
    why: ConditionReason,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    let transition = conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == value)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    let condition = Condition {
        type_: type_.into(),
        status: value.into(),
        reason: why.as_str().into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: transition,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// What every condition written in one reconcile shares: the generation it describes and
/// the time of a transition.
pub(super) struct ConditionStamp {
    pub(super) generation: Option<i64>,
    pub(super) now: Timestamp,
}

impl ConditionStamp {
    pub(super) fn set(
        &self,
        conditions: &mut Vec<Condition>,
        type_: &str,
        value: &str,
        why: ConditionReason,
        message: &str,
    ) {
        set_condition(
            conditions,
            type_,
            value,
            why,
            message,
            self.generation,
            self.now,
        );
    }
}
