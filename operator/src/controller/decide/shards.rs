//! What a run's engine pods need beyond one engine's when its entry is sharded
//! (`engines[].shards: N`): all N shard pods are created at once, each alone on its own node of
//! the instance type (the engine pods' anti-affinity against every membench engine), and the
//! run follows the shard that needs attention most: a shard that failed or was deleted before
//! one still starting, one still starting before the ready ones. That shard goes through the
//! one-engine path of [`super::lifecycle`] unchanged (the same waits, failures and kept
//! results), its messages prefixed with the shard's index and pod, so a shard that dies
//! mid-load fails the run naming it and keeping what was measured; once every shard is ready,
//! the client starts on shard 0's node with every shard's address, in shard order. A run with
//! `spec.peak.replica` has one more engine pod, its replica ([`pods::replica_pod`]), followed
//! the same way and named `replica (pod ...)` in its messages; it comes last in the run's list,
//! and the client, which starts once it too is ready, syncs it rather than loading it. Part of
//! the pure decision, like `lifecycle`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::crd::ConditionReason;

use super::conditions::{ENGINE_POD_CREATED, SHARD_PODS_CREATED};
use super::engine_run::EngineRun;
use super::observation::pods_of;
use super::pod_state::{self, PodState, pod_state};
use super::step::Step;
use crate::controller::build::pods::{self, Component, engine_pod_order, is_replica, shard_index};

/// How much a shard pod's state needs the run's attention: lower first. A shard that ended
/// or is being deleted decides the run's fate whatever the others do.
fn urgency(state: &PodState) -> u8 {
    match state {
        PodState::Deleting | PodState::Terminated { .. } => 0,
        PodState::ContainerError { .. }
        | PodState::ImagePullFailed { .. }
        | PodState::ConfigError { .. } => 1,
        PodState::Unscheduled { .. } => 2,
        PodState::Unready { .. } => 3,
        PodState::Starting { .. } => 4,
        PodState::Ready => 5,
    }
}

/// The words that name a shard, the replica, or the engine beside a replica, in its run's
/// messages.
pub(super) fn shard_label(pod: &Pod) -> String {
    if is_replica(pod) {
        format!("replica (pod {})", pod.name_any())
    } else if pod.labels().contains_key(pods::LABEL_SHARD) {
        format!("shard {} (pod {})", shard_index(pod), pod.name_any())
    } else {
        format!("engine (pod {})", pod.name_any())
    }
}

/// An engine pod a run should have and does not: how its messages name it (`None` for the one
/// engine of a run without shards or replica).
pub(super) struct MissingPod {
    pub label: Option<String>,
}

impl Step<'_, '_> {
    /// How many engine pods run `index` has: its entry's shards, or 1.
    pub(super) fn shard_count(&self, index: usize) -> usize {
        self.benchmark
            .spec
            .engine_of_run(index)
            .shards
            .map_or(1, |n| n as usize)
    }

    /// Whether the benchmark's runs have a replica pod beside their engine
    /// (`spec.peak.replica`).
    pub(super) fn has_replica(&self) -> bool {
        self.benchmark
            .spec
            .peak
            .as_ref()
            .is_some_and(|p| p.replica.is_some())
    }

    /// Whether run `index` has more than one engine pod (shards, or a replica), so its
    /// messages name the pod they are about.
    pub(super) fn several_engine_pods(&self, index: usize) -> bool {
        self.shard_count(index) > 1 || self.has_replica()
    }

    /// Run `index`'s engine pods, in shard order, the replica last.
    pub(super) fn engine_pods(&self, index: usize) -> Vec<Pod> {
        let mut engines = pods_of(self.pods, index, Component::Engine);
        engines.sort_by_key(engine_pod_order);
        engines
    }

    /// The engine pod run `index` follows now (see the module documentation): the one with
    /// the most urgent state, the first in shard order among equals.
    pub(super) fn followed_shard(engines: &[Pod]) -> Option<Pod> {
        engines
            .iter()
            .min_by_key(|p| (urgency(&pod_state(p)), engine_pod_order(p)))
            .cloned()
    }

    /// The first engine pod of run `index` that does not exist (shard 0 of a run that has
    /// none; the replica after every shard).
    pub(super) fn missing_shard(&self, index: usize, engines: &[Pod]) -> Option<MissingPod> {
        let benchmark = self.benchmark.name_any();
        let primaries: Vec<&Pod> = engines.iter().filter(|p| !is_replica(p)).collect();
        if let Some(s) =
            (0..self.shard_count(index)).find(|s| !primaries.iter().any(|p| shard_index(p) == *s))
        {
            let name = pods::shard_pod_name(&benchmark, index, s);
            let label = if self.shard_count(index) > 1 {
                Some(format!("shard {s} (pod {name})"))
            } else {
                self.has_replica().then(|| format!("engine (pod {name})"))
            };
            return Some(MissingPod { label });
        }
        (self.has_replica() && !engines.iter().any(is_replica)).then(|| {
            let name = pods::replica_pod_name(&benchmark, index);
            MissingPod {
                label: Some(format!("replica (pod {name})")),
            }
        })
    }

    /// Runs `act` on `run` for the shard pod `shard` (`None`: an unsharded run, or every
    /// shard ready), then prefixes the engine's message with the shard's name, so whatever the
    /// one-engine path says about that pod says which shard it is.
    pub(super) fn naming_shard<T>(
        &mut self,
        run: &mut EngineRun<'_>,
        shard: Option<&Pod>,
        act: impl FnOnce(&mut Self, &mut EngineRun<'_>) -> T,
    ) -> T {
        let outcome = act(self, run);
        if let Some(pod) = shard {
            let prefix = format!("{}: ", shard_label(pod));
            let engine = run.engine_mut();
            if let Some(message) = engine.message.as_mut()
                && !message.starts_with(&prefix)
            {
                message.insert_str(0, &prefix);
            }
        }
        outcome
    }

    /// Creates `run`'s engine pods that do not exist yet (all of them, or the shards an
    /// operator that stopped mid-way did not create), unless the API server refused one, a
    /// pod of an earlier benchmark of the same name is in the way, or other benchmarks come
    /// first in the pool's queue. Returns whether it created them.
    pub(super) fn create_engine_pods(
        &mut self,
        run: &mut EngineRun<'_>,
        memory: u64,
        existing: &[Pod],
    ) -> bool {
        let index = run.index();
        // Later engines prefer the node the first one of their instance type ran on, so
        // their figures (items/s above all) compare like with like (with parallelism above
        // 1 that node is often busy, and the scheduler takes another).
        let instance_type = self.benchmark.spec.instance_type_of_run(index);
        let first_node = run
            .earlier()
            .iter()
            .filter(|e| e.instance_type.as_deref() == Some(instance_type.as_str()))
            .find_map(|e| e.node_name.clone());
        let mut wanted: Vec<Pod> = pods::shard_pods(
            self.benchmark,
            index,
            memory,
            first_node.as_deref(),
            &self.settings.pods,
        );
        if self.has_replica() {
            wanted.push(pods::replica_pod(
                self.benchmark,
                index,
                memory,
                first_node.as_deref(),
                &self.settings.pods,
            ));
        }
        wanted.retain(|p| !existing.iter().any(|e| e.name_any() == p.name_any()));
        for pod in &wanted {
            let name = pod.name_any();
            if let Some(refusal) = self.rejection(&name) {
                let message = format!("the API server rejected the engine pod {name}: {refusal}");
                self.fail(run, ConditionReason::PodRejected, message, false);
                return false;
            }
            if self.blocked_by_earlier_pod(run, &name) {
                return false;
            }
        }
        if existing.is_empty() && self.benchmarks_ahead(index) > 0 {
            self.wait_for_free_node(run);
            return false;
        }
        self.plan.create.extend(wanted);
        let engine = run.engine_mut();
        engine.started_at = Some(Time(self.now));
        engine.reason = Some(ConditionReason::WaitingForNode);
        engine.message = Some(if self.shard_count(index) > 1 {
            SHARD_PODS_CREATED.into()
        } else {
            ENGINE_POD_CREATED.into()
        });
        self.requeue(Duration::from_secs(2));
        true
    }

    /// Records where a sharded run's shards are, each shard's pod and node in shard order, and
    /// the node of a run's replica.
    pub(super) fn record_shards(&self, run: &mut EngineRun<'_>, engines: &[Pod]) {
        let index = run.index();
        let engine = run.engine_mut();
        if let Some(node) = engines
            .iter()
            .filter(|p| is_replica(p))
            .find_map(pod_state::node_name)
        {
            engine.replica_node_name = Some(node);
        }
        if self.shard_count(index) < 2 {
            return;
        }
        for pod in engines.iter().filter(|p| !is_replica(p)) {
            let shard = engine.shard_mut(shard_index(pod) as u32);
            shard.pod = pod.name_any();
            if let Some(node) = pod_state::node_name(pod) {
                shard.node_name = Some(node);
            }
        }
    }

    /// The address of every engine pod the client loads, in shard order, once each of the
    /// run's engine pods (its replica too) has one.
    pub(super) fn shard_addresses(engines: &[Pod]) -> Option<Vec<String>> {
        let all: Vec<(bool, String)> = engines
            .iter()
            .map(|p| pod_state::pod_ip(p).map(|ip| (is_replica(p), ip)))
            .collect::<Option<_>>()?;
        Some(
            all.into_iter()
                .filter(|(replica, _)| !replica)
                .map(|(_, ip)| ip)
                .collect(),
        )
    }

    /// The address of run `index`'s replica pod, once it has one.
    pub(super) fn replica_ip(&self, index: usize) -> Option<String> {
        self.engine_pods(index)
            .iter()
            .filter(|p| is_replica(p))
            .find_map(pod_state::pod_ip)
    }
}
