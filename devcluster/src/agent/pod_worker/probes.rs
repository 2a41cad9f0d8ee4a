//! The worker's side of a container's probes (startup, readiness, liveness): when each is due,
//! and what its results do (started, ready, or killed for a restart). Running one probe is
//! [`crate::agent::probes`].

use k8s_openapi::api::core::v1::Probe;
use kube::runtime::events::EventType;
use nix::sys::signal::Signal;
use tokio::time::Instant;

use crate::agent::probes::{ExecContext, ProbeResult, ProbeTiming, run_probe};
use crate::agent::process::signal_group;

use super::PodWorker;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProbeKind {
    Startup,
    Readiness,
    Liveness,
}

pub(super) struct ProbeState {
    probe: Probe,
    timing: ProbeTiming,
    next_at: Instant,
    successes: u32,
    failures: u32,
    in_flight: bool,
}

impl ProbeState {
    pub(super) fn new(probe: &Option<Probe>, started: Instant) -> Option<ProbeState> {
        let probe = probe.clone()?;
        let timing = ProbeTiming::of(&probe);
        Some(ProbeState {
            next_at: started + timing.initial_delay,
            probe,
            timing,
            successes: 0,
            failures: 0,
            in_flight: false,
        })
    }
}

pub(super) struct ProbeOutcome {
    slot: usize,
    run_id: u64,
    kind: ProbeKind,
    result: ProbeResult,
}

impl PodWorker {
    /// Starts the probes that are due, each in its own task.
    pub(super) fn schedule_probes(&mut self, i: usize) {
        let now = Instant::now();
        let pod_ip = self.pod_ip.map(|ip| ip.to_string()).unwrap_or_default();
        let slot = &mut self.slots[i];
        let started = slot.record.started;
        let Some(run) = &mut slot.run else {
            return;
        };
        if run.kill_deadline.is_some() {
            return;
        }
        let kinds: [(ProbeKind, &mut Option<ProbeState>); 3] = [
            (ProbeKind::Startup, &mut run.startup),
            (ProbeKind::Readiness, &mut run.readiness),
            (ProbeKind::Liveness, &mut run.liveness),
        ];
        for (kind, state) in kinds {
            let Some(state) = state else { continue };
            // Readiness and liveness probes wait for the startup probe.
            if (kind != ProbeKind::Startup && !started) || state.in_flight || state.next_at > now {
                continue;
            }
            state.in_flight = true;
            let probe = state.probe.clone();
            let container = slot.spec.clone();
            let env = run.env.clone();
            let working_dir = self.dir.join("work");
            let ctx = self.ctx.clone();
            let tx = self.probes_tx.clone();
            let pod_ip = pod_ip.clone();
            let run_id = run.id;
            tokio::spawn(async move {
                let find = |name: &str| ctx.resolver.find_program(name);
                let exec = ExecContext {
                    env: &env,
                    working_dir: &working_dir,
                    find_program: &find,
                };
                let result = run_probe(&probe, &container, &pod_ip, &exec).await;
                let _ = tx.send(ProbeOutcome {
                    slot: i,
                    run_id,
                    kind,
                    result,
                });
            });
        }
    }

    pub(super) async fn probed(&mut self, outcome: ProbeOutcome) {
        let grace = self.grace_period();
        let slot = &mut self.slots[outcome.slot];
        let Some(run) = slot.run.as_mut().filter(|r| r.id == outcome.run_id) else {
            return;
        };
        let state = match outcome.kind {
            ProbeKind::Startup => &mut run.startup,
            ProbeKind::Readiness => &mut run.readiness,
            ProbeKind::Liveness => &mut run.liveness,
        };
        let Some(state) = state.as_mut() else { return };
        state.in_flight = false;
        state.next_at = Instant::now() + state.timing.period;
        let failed_message = match &outcome.result {
            Ok(()) => {
                state.successes += 1;
                state.failures = 0;
                None
            }
            Err(e) => {
                state.failures += 1;
                state.successes = 0;
                Some(e.clone())
            }
        };
        let passed = state.successes >= state.timing.success_threshold;
        let gave_up = state.failures >= state.timing.failure_threshold;
        let mut kill = false;
        match outcome.kind {
            ProbeKind::Startup => {
                if passed {
                    slot.record.started = true;
                    slot.record.ready = slot.spec.readiness_probe.is_none();
                    run.startup = None;
                } else if gave_up {
                    kill = true;
                }
            }
            ProbeKind::Readiness => {
                if passed {
                    slot.record.ready = true;
                } else if gave_up {
                    slot.record.ready = false;
                }
            }
            ProbeKind::Liveness => kill = gave_up,
        }
        if kill {
            // As the kubelet does: the container is killed and restarted per restartPolicy.
            signal_group(run.pid, Signal::SIGTERM);
            run.kill_deadline = Some(Instant::now() + grace);
        }
        let name = slot.spec.name.clone();
        if let Some(message) = failed_message {
            let kind = format!("{:?}", outcome.kind);
            self.event(
                EventType::Warning,
                "Unhealthy",
                "Probe",
                format!("{kind} probe failed: {message}"),
            )
            .await;
            if kill {
                let note = format!(
                    "Container {name} failed its {} probe, will be restarted",
                    kind.to_lowercase()
                );
                self.event(EventType::Normal, "Killing", "Kill", note).await;
            }
        }
    }
}
