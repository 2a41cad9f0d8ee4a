//! What a run's replica pod (`spec.peak.replica`) needs beyond what [`super::shards`] does for
//! every extra engine pod: a node of its own. The replica keeps the engine pods' anti-affinity
//! against every membench engine, its own run's included, so it needs a second node of the
//! instance type beside the one its engine runs on. When the scheduler finds every node that
//! could take it running this benchmark's own engines, no other benchmark will free one: with
//! one such node the pool has no second node, and with more, `spec.parallelism` has the runs'
//! engines holding them all. Either way the replica waits (a node may be added, by hand or by an
//! autoscaler) until the scheduling deadline, then the run fails as `Unschedulable` saying
//! what the replica needs and what to do. Nodes busy with other benchmarks' engines are the
//! queue's ([`super::queue`]), as for any engine pod. Part of the pure decision.

use k8s_openapi::jiff::Timestamp;

use super::engine_run::EngineRun;
use super::observation::elapsed_since;
use super::queue::{busy_nodes, nodes_busy};
use super::results::tail;
use super::step::Step;

impl Step<'_, '_> {
    /// `run`'s replica pod, created at `created`, is not scheduled; `scheduler` is why.
    pub(super) fn replica_unscheduled(
        &mut self,
        run: &mut EngineRun<'_>,
        created: Timestamp,
        scheduler: &str,
    ) {
        let spec = &self.benchmark.spec;
        let instance_type = spec.instance_type_of_run(run.index());
        let own = self.own_engines_on_nodes(&instance_type);
        let timeout = self.settings.scheduling_timeout;
        let waited_out = elapsed_since(self.now, created) >= timeout;
        let what_then = match busy_nodes(scheduler) {
            Some(nodes) if nodes <= own && nodes < 2 => format!(
                "a replica needs a second node of instance type {instance_type}, beside its engine's, and the pool has 1 node that can take an engine, where the engine runs: add a node of the type, or remove spec.peak.replica"
            ),
            Some(nodes) if nodes <= own => format!(
                "a replica needs a node of instance type {instance_type} of its own, and the pool's {nodes} nodes that can take an engine each run one of this benchmark's engines (spec.parallelism is {}; with spec.peak.replica each run holds two nodes at once): set parallelism to {} or lower, or add nodes of the type",
                spec.parallelism,
                (nodes / 2).max(1)
            ),
            _ if nodes_busy(scheduler) => {
                self.wait_for_busy_node(run, scheduler);
                return;
            }
            _ => format!("no node of instance type {instance_type} takes the replica pod"),
        };
        let message = format!("{what_then} (the scheduler: {})", tail(scheduler, 300));
        let late = || {
            format!(
                "the replica pod was not scheduled within {} s: {message}",
                timeout.as_secs()
            )
        };
        self.not_placed(run, waited_out, late, message.clone());
    }
}
