//! A container of the pod as the worker keeps it: its spec, the status record it reports, the
//! image it pulled, its retry time and back-off, and its current run (the process, its probes).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use crate::agent::images::PulledImage;
use crate::agent::podspec::memory_limit_bytes;
use crate::agent::status::{ContainerRecord, Lifecycle};

use super::exits::INITIAL_BACKOFF;
use super::probes::ProbeState;

/// The current process of a container.
pub(super) struct Run {
    pub(super) id: u64,
    pub(super) pid: i32,
    pub(super) started_at: Timestamp,
    pub(super) started_instant: Instant,
    pub(super) env: BTreeMap<String, String>,
    pub(super) oom_killed: bool,
    /// Set once the process was asked to stop: SIGKILL when it passes.
    pub(super) kill_deadline: Option<Instant>,
    pub(super) startup: Option<ProbeState>,
    pub(super) readiness: Option<ProbeState>,
    pub(super) liveness: Option<ProbeState>,
}

/// One container of the pod (init or regular).
pub(super) struct Slot {
    pub(super) spec: Container,
    pub(super) init: bool,
    pub(super) record: ContainerRecord,
    pub(super) pulled: Option<PulledImage>,
    pub(super) run: Option<Run>,
    /// When to try again: a pull, a config lookup, or a restart.
    pub(super) retry_at: Option<Instant>,
    pub(super) pull_failed_at: Option<Instant>,
    pub(super) backoff: Duration,
    pub(super) starts: u32,
    pub(super) memory_limit: Option<u64>,
}

impl Slot {
    pub(super) fn new(spec: &Container, init: bool) -> Slot {
        Slot {
            record: ContainerRecord::new(&spec.name, spec.image.as_deref().unwrap_or_default()),
            memory_limit: memory_limit_bytes(spec),
            spec: spec.clone(),
            init,
            pulled: None,
            run: None,
            retry_at: None,
            pull_failed_at: None,
            backoff: INITIAL_BACKOFF,
            starts: 0,
        }
    }

    pub(super) fn terminated(&self) -> bool {
        matches!(self.record.lifecycle, Lifecycle::Terminated(_))
    }

    pub(super) fn succeeded(&self) -> bool {
        matches!(&self.record.lifecycle, Lifecycle::Terminated(t) if t.exit_code == 0)
    }

    pub(super) fn file(&self, dir: &std::path::Path, suffix: &str) -> PathBuf {
        dir.join(format!("{}.{suffix}", self.spec.name))
    }
}
