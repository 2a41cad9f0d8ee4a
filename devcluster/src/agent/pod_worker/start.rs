//! Starting a container: "pulling" its image, building its environment, identity and volumes,
//! and spawning its process; and the waiting states on the way (`ErrImagePull`,
//! `ImagePullBackOff`, `CreateContainerConfigError`, `ContainerCreating`,
//! `CreateContainerError`).

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;
use tokio::time::Instant;

use crate::agent::images::PullError;
use crate::agent::mount_namespace::WorkingDir;
use crate::agent::nodes::NODE_IP;
use crate::agent::podspec::{container_env, expand};
use crate::agent::process::{ContainerProcess, LaunchSpec};
use crate::agent::security::{localhost_seccomp_profile, process_identity, seccomp_profiles_dir};
use crate::agent::status::{Lifecycle, Termination};
use crate::agent::volumes::{VolumeSources, mounts_service_account, prepare_volumes};

use super::PodWorker;
use super::exits::{Exit, INITIAL_BACKOFF, MAX_BACKOFF};
use super::probes::ProbeState;
use super::slot::Run;

/// A failed pull is reported as `ErrImagePull`, then as `ImagePullBackOff` until the retry.
const ERR_IMAGE_PULL_SHOWN_FOR: Duration = Duration::from_secs(2);
/// Waiting reasons of a container that cannot be made yet, retried after a back-off.
const CONFIG_ERROR: &str = "CreateContainerConfigError";
const CREATE_ERROR: &str = "CreateContainerError";

impl PodWorker {
    /// Moves a container that is not running towards running, when its retry time has come.
    pub(super) async fn progress(&mut self, i: usize) {
        let now = Instant::now();
        let slot = &mut self.slots[i];
        if slot.run.is_some() || slot.terminated() {
            return;
        }
        if let Some(failed_at) = slot.pull_failed_at
            && now >= failed_at + ERR_IMAGE_PULL_SHOWN_FOR
            && let Lifecycle::Waiting { reason, message } = &mut slot.record.lifecycle
            && reason == "ErrImagePull"
        {
            *reason = "ImagePullBackOff".into();
            *message = Some(format!(
                "Back-off pulling image {:?}: ErrImagePull: {}",
                slot.record.image,
                message.clone().unwrap_or_default()
            ));
        }
        if slot.retry_at.is_some_and(|at| at > now) {
            return;
        }
        self.start(i).await;
    }

    /// The container cannot be made yet, and the kubelet retries after a back-off: its
    /// configuration cannot be built (`CreateContainerConfigError`: a missing ConfigMap, a token
    /// the API server refused, a user that breaks `runAsNonRoot`), or the runtime cannot create
    /// it (`CreateContainerError`: a `Localhost` seccomp profile that is not on the node). It
    /// waits with that reason, with a `Failed` event.
    async fn cannot_create(&mut self, i: usize, reason: &str, message: String) {
        let slot = &mut self.slots[i];
        slot.record.lifecycle = Lifecycle::Waiting {
            reason: reason.into(),
            message: Some(message.clone()),
        };
        slot.retry_at = Some(Instant::now() + INITIAL_BACKOFF);
        self.event(
            EventType::Warning,
            "Failed",
            "Create",
            format!("Error: {message}"),
        )
        .await;
    }

    /// A volume cannot be set up yet (a missing Secret or ConfigMap): the container stays
    /// `ContainerCreating` and it is retried, with a `FailedMount` event as the kubelet records.
    async fn mount_error(&mut self, i: usize, message: String) {
        let slot = &mut self.slots[i];
        slot.record.lifecycle = Lifecycle::Waiting {
            reason: "ContainerCreating".into(),
            message: None,
        };
        slot.retry_at = Some(Instant::now() + INITIAL_BACKOFF);
        self.event(EventType::Warning, "FailedMount", "Mount", message)
            .await;
    }

    /// "Pulls" the image, builds the environment and command, and starts the process.
    async fn start(&mut self, i: usize) {
        let pod_ip = self
            .pod_ip
            .expect("an address is assigned before starting")
            .to_string();
        let image = self.slots[i].record.image.clone();

        if self.slots[i].pulled.is_none() {
            match self.ctx.resolver.pull(&image, self.node_arch) {
                Ok(pulled) => {
                    let slot = &mut self.slots[i];
                    slot.record.image_id = Some(pulled.image_id.clone());
                    slot.pulled = Some(pulled.clone());
                    slot.pull_failed_at = None;
                    slot.backoff = INITIAL_BACKOFF;
                    let mut note = format!("Container image {image:?} runs as {}", pulled.image_id);
                    if let Some(why) = &pulled.note {
                        note.push_str(&format!(" ({why})"));
                    }
                    self.event(EventType::Normal, "Pulled", "Pull", note).await;
                }
                Err(PullError(message)) => {
                    let slot = &mut self.slots[i];
                    slot.record.lifecycle = Lifecycle::Waiting {
                        reason: "ErrImagePull".into(),
                        message: Some(message.clone()),
                    };
                    slot.pull_failed_at = Some(Instant::now());
                    slot.retry_at = Some(Instant::now() + slot.backoff);
                    slot.backoff = (slot.backoff * 2).min(MAX_BACKOFF);
                    let note = format!("Failed to pull image {image:?}: {message}");
                    self.event(EventType::Warning, "Failed", "Pull", note).await;
                    return;
                }
            }
        }

        let container = self.slots[i].spec.clone();
        let mut env =
            match container_env(&self.ctx.client, &self.pod, &container, &pod_ip, NODE_IP).await {
                Ok(env) => env,
                Err(e) => return self.cannot_create(i, CONFIG_ERROR, e.to_string()).await,
            };
        if mounts_service_account(&container)
            && let Some((host, port)) = &self.ctx.api_server
        {
            env.entry("KUBERNETES_SERVICE_HOST".into())
                .or_insert_with(|| host.clone());
            env.entry("KUBERNETES_SERVICE_PORT".into())
                .or_insert_with(|| port.to_string());
        }
        let pulled = self.slots[i].pulled.clone().expect("pulled above");
        let identity = match process_identity(&self.pod, &container, &pulled) {
            Ok(identity) => identity,
            Err(e) => return self.cannot_create(i, CONFIG_ERROR, e.0).await,
        };
        let sources = VolumeSources {
            client: &self.ctx.client,
            pod: &self.pod,
            pod_ip: &pod_ip,
            host_ip: NODE_IP,
        };
        let volume_mounts = match prepare_volumes(&sources, &container, &self.dir).await {
            Ok(mounts) => mounts,
            Err(e) => return self.mount_error(i, e.to_string()).await,
        };
        // Looked for, not applied (docs/src/contributing/dev-cluster-pods-2.md).
        let profiles = seccomp_profiles_dir(&self.ctx.state_dir);
        if let Err(e) = localhost_seccomp_profile(&self.pod, &container, &profiles) {
            return self.cannot_create(i, CREATE_ERROR, e.0).await;
        }
        let command: Vec<String> = container
            .command
            .iter()
            .flatten()
            .map(|s| expand(s, &env))
            .collect();
        let args: Vec<String> = container
            .args
            .iter()
            .flatten()
            .map(|s| expand(s, &env))
            .collect();
        let started_at = Timestamp::now();
        let resolved = self
            .ctx
            .resolver
            .container_command(&pulled, &command, &args)
            .map_err(|e| e.0);
        let spawned = resolved.and_then(|mut cmd| {
            if cmd.is_engine_server {
                // The pod-address shim: engines listen only on their pod's address, as they
                // would in their own network namespace.
                cmd.args.extend(["--bind".to_string(), pod_ip.clone()]);
            }
            // What the image itself sets (its config's Env; LD_PRELOAD of jemalloc for a libc
            // engine build), under what the container sets.
            for (name, value) in &cmd.env {
                if name == "LD_PRELOAD" || !env.contains_key(name) {
                    env.insert(name.clone(), value.clone());
                }
            }
            let slot = &self.slots[i];
            if slot.starts > 0 {
                // Keep the previous run's output for `kubectl logs --previous`.
                let _ = std::fs::rename(
                    slot.file(&self.dir, "log"),
                    slot.file(&self.dir, "previous.log"),
                );
            }
            let launch = LaunchSpec {
                program: cmd.program,
                args: cmd.args,
                wrapper: cmd.wrapper,
                image_root: cmd.image_root,
                env: env.clone(),
                working_dir: container
                    .working_dir
                    .as_deref()
                    .filter(|d| !d.is_empty())
                    .map(|d| WorkingDir::Container(PathBuf::from(d)))
                    .unwrap_or_else(|| WorkingDir::Pod(self.dir.join("work"))),
                log_path: slot.file(&self.dir, "log"),
                termination_file: slot.file(&self.dir, "termination-log"),
                termination_path: container
                    .termination_message_path
                    .clone()
                    .unwrap_or_else(|| "/dev/termination-log".into()),
                start_error_file: slot.file(&self.dir, "start-error"),
                use_mount_namespace: self.ctx.use_mount_namespace,
                volume_mounts: volume_mounts.clone(),
                identity: identity.clone(),
                runtime_dir: self.ctx.runtime_dir.clone(),
                pid_file: slot.file(&self.dir, "pid"),
            };
            ContainerProcess::spawn(&launch)
                .map_err(|e| format!("failed to start {}: {e}", launch.program.display()))
        });

        let process = match spawned {
            Ok(process) => process,
            Err(message) => {
                self.event(
                    EventType::Warning,
                    "Failed",
                    "Start",
                    format!("Error: {message}"),
                )
                .await;
                let t = Termination {
                    exit_code: 128,
                    signal: None,
                    reason: "StartError".into(),
                    message: Some(message),
                    started_at: Some(started_at),
                    finished_at: Timestamp::now(),
                    container_id: None,
                };
                self.slots[i].starts += 1;
                self.finish_run(i, t);
                return;
            }
        };

        self.next_run_id += 1;
        let run_id = self.next_run_id;
        let pid = process.pid();
        let exits = self.exits_tx.clone();
        tokio::spawn(async move {
            let status = process.wait().await;
            let _ = exits.send(Exit {
                slot: i,
                run_id,
                status,
            });
        });
        let now = Instant::now();
        let slot = &mut self.slots[i];
        if slot.starts > 0 {
            slot.record.restart_count += 1;
        }
        slot.starts += 1;
        slot.retry_at = None;
        let startup = ProbeState::new(&slot.spec.startup_probe, now);
        slot.record.started = startup.is_none();
        slot.record.ready =
            slot.record.started && slot.spec.readiness_probe.is_none() && !slot.init;
        slot.record.container_id = Some(format!("local-process://{pid}"));
        slot.record.lifecycle = Lifecycle::Running { started_at };
        slot.run = Some(Run {
            id: run_id,
            pid,
            started_at,
            started_instant: now,
            env,
            oom_killed: false,
            kill_deadline: None,
            startup,
            readiness: if slot.init {
                None
            } else {
                ProbeState::new(&slot.spec.readiness_probe, now)
            },
            liveness: if slot.init {
                None
            } else {
                ProbeState::new(&slot.spec.liveness_probe, now)
            },
        });
        tracing::info!(pod = %self.pod_label(), container = %container.name, pid, ip = %pod_ip, "started container");
        let note = format!("Started container {} (pid {pid})", container.name);
        self.event(EventType::Normal, "Started", "Start", note)
            .await;
    }
}
