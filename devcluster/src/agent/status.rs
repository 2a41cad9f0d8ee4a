//! Pod status as a kubelet writes it, built from what the agent knows about each container.
//! Pure: no I/O, so the phase and condition rules are unit tested without a cluster.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// How a container ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Termination {
    pub exit_code: i32,
    pub signal: Option<i32>,
    /// `Completed`, `Error`, `OOMKilled`, `StartError`, `ContainerStatusUnknown`.
    pub reason: String,
    pub message: Option<String>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Timestamp,
    pub container_id: Option<String>,
}

/// Where a container is in its life.
#[derive(Debug, Clone, PartialEq)]
pub enum Lifecycle {
    /// Not running: being "pulled" or created (`ContainerCreating`, `ErrImagePull`, ...), or
    /// waiting to be restarted (`CrashLoopBackOff`, with `last_termination` set).
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        started_at: Timestamp,
    },
    /// Ended and not going to be restarted.
    Terminated(Termination),
}

/// What the agent knows about one container.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerRecord {
    pub name: String,
    pub image: String,
    pub image_id: Option<String>,
    pub container_id: Option<String>,
    pub lifecycle: Lifecycle,
    pub last_termination: Option<Termination>,
    pub restart_count: i32,
    /// The startup probe passed (or there is none) while running.
    pub started: bool,
    /// The readiness probe passes (or there is none) while running.
    pub ready: bool,
}

impl ContainerRecord {
    pub fn new(name: &str, image: &str) -> Self {
        ContainerRecord {
            name: name.to_string(),
            image: image.to_string(),
            image_id: None,
            container_id: None,
            lifecycle: Lifecycle::Waiting {
                reason: "ContainerCreating".into(),
                message: None,
            },
            last_termination: None,
            restart_count: 0,
            started: false,
            ready: false,
        }
    }

    fn succeeded(&self) -> bool {
        matches!(&self.lifecycle, Lifecycle::Terminated(t) if t.exit_code == 0)
    }
}

/// What the agent knows about a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodRecord {
    pub init_containers: Vec<ContainerRecord>,
    pub containers: Vec<ContainerRecord>,
    pub pod_ip: Option<String>,
    pub host_ip: String,
    pub start_time: Timestamp,
    /// The pod's `metadata.generation`, echoed as `observedGeneration`.
    pub generation: Option<i64>,
    /// `spec.readinessGates` condition types.
    pub readiness_gates: Vec<String>,
}

/// The pod phase from its containers, following the kubelet's rules.
pub fn pod_phase(pod: &PodRecord) -> &'static str {
    let init_failed = pod
        .init_containers
        .iter()
        .any(|c| matches!(&c.lifecycle, Lifecycle::Terminated(t) if t.exit_code != 0));
    if init_failed {
        return "Failed";
    }
    if !pod.init_containers.iter().all(ContainerRecord::succeeded) {
        return "Pending";
    }
    let never_started = pod
        .containers
        .iter()
        .any(|c| matches!(c.lifecycle, Lifecycle::Waiting { .. }) && c.last_termination.is_none());
    if never_started {
        return "Pending";
    }
    let all_terminated = pod
        .containers
        .iter()
        .all(|c| matches!(c.lifecycle, Lifecycle::Terminated(_)));
    if !all_terminated {
        // Running, or waiting to be restarted after a termination.
        return "Running";
    }
    // The agent leaves a container terminated only when it will not restart it.
    if pod.containers.iter().all(ContainerRecord::succeeded) {
        "Succeeded"
    } else {
        "Failed"
    }
}

fn time(t: Timestamp) -> Time {
    Time(t)
}

fn terminated_state(t: &Termination) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: t.exit_code,
        signal: t.signal,
        reason: Some(t.reason.clone()),
        message: t.message.clone().filter(|m| !m.is_empty()),
        started_at: t.started_at.map(time),
        finished_at: Some(time(t.finished_at)),
        container_id: t.container_id.clone(),
    }
}

fn container_status(c: &ContainerRecord) -> ContainerStatus {
    let state = match &c.lifecycle {
        Lifecycle::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.clone()),
                message: message.clone(),
            }),
            ..Default::default()
        },
        Lifecycle::Running { started_at } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(time(*started_at)),
            }),
            ..Default::default()
        },
        Lifecycle::Terminated(t) => ContainerState {
            terminated: Some(terminated_state(t)),
            ..Default::default()
        },
    };
    let running = matches!(c.lifecycle, Lifecycle::Running { .. });
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone(),
        image_id: c.image_id.clone().unwrap_or_default(),
        container_id: c.container_id.clone(),
        ready: running && c.ready,
        started: Some(running && c.started),
        restart_count: c.restart_count,
        state: Some(state),
        last_state: Some(ContainerState {
            terminated: c.last_termination.as_ref().map(terminated_state),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A condition whose `lastTransitionTime` is kept from `previous` unless its status changed.
fn condition(
    previous: Option<&PodStatus>,
    type_: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<String>,
    generation: Option<i64>,
    now: Timestamp,
) -> PodCondition {
    let status = if ok { "True" } else { "False" };
    let since = previous
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or(time(now));
    PodCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.map(str::to_string),
        message,
        last_transition_time: Some(since),
        last_probe_time: None,
        observed_generation: generation,
    }
}

/// The status to write for a pod. `previous` is the status on the API server (for transition
/// times and the readiness gates' conditions, which others set).
pub fn pod_status(pod: &PodRecord, previous: Option<&PodStatus>, now: Timestamp) -> PodStatus {
    let phase = pod_phase(pod);
    let terminal = phase == "Succeeded" || phase == "Failed";
    let generation = pod.generation;

    let incomplete_init: Vec<&str> = pod
        .init_containers
        .iter()
        .filter(|c| !c.succeeded())
        .map(|c| c.name.as_str())
        .collect();
    let initialized = incomplete_init.is_empty();
    let unready: Vec<&str> = pod
        .containers
        .iter()
        .filter(|c| !(matches!(c.lifecycle, Lifecycle::Running { .. }) && c.ready))
        .map(|c| c.name.as_str())
        .collect();
    let containers_ready = unready.is_empty() && !terminal;
    let unready_message = (!unready.is_empty())
        .then(|| format!("containers with unready status: [{}]", unready.join(" ")));
    let not_ready_reason = if terminal {
        "PodCompleted"
    } else {
        "ContainersNotReady"
    };

    // Readiness gates: conditions other controllers set; Ready needs each to be True.
    let gate_problem = pod.readiness_gates.iter().find_map(|gate| {
        let found = previous
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| &c.type_ == gate));
        match found {
            None => Some(format!(
                "corresponding condition of pod readiness gate \"{gate}\" does not exist."
            )),
            Some(c) if c.status != "True" => Some(format!(
                "the status of pod readiness gate \"{gate}\" is not \"True\", but {}",
                c.status
            )),
            Some(_) => None,
        }
    });

    let mut conditions = vec![
        condition(
            previous,
            "PodReadyToStartContainers",
            pod.pod_ip.is_some(),
            None,
            None,
            generation,
            now,
        ),
        condition(
            previous,
            "Initialized",
            initialized,
            (!initialized).then_some("ContainersNotInitialized"),
            (!initialized).then(|| {
                format!(
                    "containers with incomplete status: [{}]",
                    incomplete_init.join(" ")
                )
            }),
            generation,
            now,
        ),
        condition(
            previous,
            "ContainersReady",
            containers_ready,
            (!containers_ready).then_some(not_ready_reason),
            if terminal {
                None
            } else {
                unready_message.clone()
            },
            generation,
            now,
        ),
    ];
    let ready = containers_ready && gate_problem.is_none();
    let (ready_reason, ready_message) = if ready {
        (None, None)
    } else if !containers_ready {
        (
            Some(not_ready_reason),
            if terminal { None } else { unready_message },
        )
    } else {
        (Some("ReadinessGatesNotReady"), gate_problem)
    };
    conditions.push(condition(
        previous,
        "Ready",
        ready,
        ready_reason,
        ready_message,
        generation,
        now,
    ));

    let init_statuses: Vec<ContainerStatus> =
        pod.init_containers.iter().map(container_status).collect();
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        container_statuses: Some(pod.containers.iter().map(container_status).collect()),
        init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
        host_ip: Some(pod.host_ip.clone()),
        host_ips: Some(vec![HostIP {
            ip: pod.host_ip.clone(),
        }]),
        pod_ip: pod.pod_ip.clone(),
        pod_ips: pod.pod_ip.as_ref().map(|ip| vec![PodIP { ip: ip.clone() }]),
        start_time: Some(time(pod.start_time)),
        observed_generation: generation,
        ..Default::default()
    }
}

/// The strategic-merge patch that sets `status`. Conditions merge by type, so a reason or
/// message a condition no longer has must be removed explicitly with `null`.
pub fn status_patch(status: &PodStatus) -> serde_json::Value {
    let mut value = serde_json::to_value(status).expect("a pod status serializes");
    if let Some(conditions) = value.get_mut("conditions").and_then(|c| c.as_array_mut()) {
        for c in conditions {
            let object = c.as_object_mut().expect("a condition is an object");
            for field in ["reason", "message"] {
                object.entry(field).or_insert(serde_json::Value::Null);
            }
        }
    }
    serde_json::json!({ "status": value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn pod(containers: Vec<ContainerRecord>) -> PodRecord {
        PodRecord {
            init_containers: vec![],
            containers,
            pod_ip: Some("127.100.0.2".into()),
            host_ip: "127.0.0.1".into(),
            start_time: at(1),
            generation: Some(1),
            readiness_gates: vec![],
        }
    }

    fn running(ready: bool) -> ContainerRecord {
        ContainerRecord {
            lifecycle: Lifecycle::Running { started_at: at(2) },
            started: true,
            ready,
            ..ContainerRecord::new("engine", "redis:7.0.15")
        }
    }

    fn terminated(exit_code: i32, reason: &str) -> ContainerRecord {
        ContainerRecord {
            lifecycle: Lifecycle::Terminated(Termination {
                exit_code,
                signal: None,
                reason: reason.into(),
                message: Some("bye".into()),
                started_at: Some(at(2)),
                finished_at: at(3),
                container_id: None,
            }),
            ..ContainerRecord::new("engine", "redis:7.0.15")
        }
    }

    fn condition_of<'a>(status: &'a PodStatus, type_: &str) -> &'a PodCondition {
        status
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap()
    }

    #[test]
    fn creating_containers_keep_the_pod_pending() {
        let status = pod_status(
            &pod(vec![ContainerRecord::new("engine", "redis:7.0.15")]),
            None,
            at(5),
        );
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        assert_eq!(condition_of(&status, "Ready").status, "False");
        assert_eq!(condition_of(&status, "Initialized").status, "True");
    }

    #[test]
    fn a_ready_container_makes_the_pod_running_and_ready() {
        let status = pod_status(&pod(vec![running(true)]), None, at(5));
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(condition_of(&status, "Ready").status, "True");
        assert_eq!(condition_of(&status, "ContainersReady").status, "True");
        let cs = &status.container_statuses.as_ref().unwrap()[0];
        assert!(cs.ready);
        assert_eq!(cs.started, Some(true));
    }

    #[test]
    fn an_unready_container_names_itself_in_the_ready_condition() {
        let status = pod_status(&pod(vec![running(false)]), None, at(5));
        let ready = condition_of(&status, "Ready");
        assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
        assert_eq!(
            ready.message.as_deref(),
            Some("containers with unready status: [engine]")
        );
    }

    #[test]
    fn exit_codes_decide_succeeded_or_failed() {
        let ok = pod_status(&pod(vec![terminated(0, "Completed")]), None, at(5));
        assert_eq!(ok.phase.as_deref(), Some("Succeeded"));
        assert_eq!(
            condition_of(&ok, "Ready").reason.as_deref(),
            Some("PodCompleted")
        );
        let failed = pod_status(&pod(vec![terminated(137, "OOMKilled")]), None, at(5));
        assert_eq!(failed.phase.as_deref(), Some("Failed"));
        let state = failed.container_statuses.unwrap()[0].state.clone().unwrap();
        assert_eq!(
            state.terminated.unwrap().reason.as_deref(),
            Some("OOMKilled")
        );
    }

    #[test]
    fn a_container_waiting_to_restart_keeps_the_pod_running() {
        let mut c = ContainerRecord::new("engine", "redis:7.0.15");
        c.lifecycle = Lifecycle::Waiting {
            reason: "CrashLoopBackOff".into(),
            message: None,
        };
        c.restart_count = 1;
        c.last_termination = match terminated(1, "Error").lifecycle {
            Lifecycle::Terminated(t) => Some(t),
            _ => unreachable!(),
        };
        let status = pod_status(&pod(vec![c]), None, at(5));
        assert_eq!(status.phase.as_deref(), Some("Running"));
        let cs = &status.container_statuses.unwrap()[0];
        assert_eq!(
            cs.last_state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .exit_code,
            1
        );
    }

    #[test]
    fn transition_times_change_only_when_a_condition_flips() {
        let first = pod_status(&pod(vec![running(false)]), None, at(5));
        let same = pod_status(&pod(vec![running(false)]), Some(&first), at(9));
        assert_eq!(
            condition_of(&same, "Ready").last_transition_time,
            Some(Time(at(5)))
        );
        let flipped = pod_status(&pod(vec![running(true)]), Some(&same), at(12));
        assert_eq!(
            condition_of(&flipped, "Ready").last_transition_time,
            Some(Time(at(12)))
        );
    }

    #[test]
    fn readiness_gates_hold_back_ready() {
        let mut p = pod(vec![running(true)]);
        p.readiness_gates = vec!["example.com/loaded".into()];
        let status = pod_status(&p, None, at(5));
        assert_eq!(condition_of(&status, "ContainersReady").status, "True");
        assert_eq!(
            condition_of(&status, "Ready").reason.as_deref(),
            Some("ReadinessGatesNotReady")
        );
    }

    #[test]
    fn status_patch_clears_stale_condition_reasons() {
        let status = pod_status(&pod(vec![running(true)]), None, at(5));
        let patch = status_patch(&status);
        let ready = patch["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert!(ready["reason"].is_null());
        assert!(ready.as_object().unwrap().contains_key("reason"));
    }
}
