//! Every pod a namespace ever held while a test ran, from a watch started before the test
//! created anything: a claim that nothing was created "before any pod" holds only if no pod was
//! ever seen, not just if none is left when the test looks (the operator deletes its pods when
//! a benchmark ends).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};

#[derive(Default)]
struct Seen {
    /// Pod name -> the benchmark its `membench.io/benchmark` label names (empty when none).
    pods: BTreeMap<String, String>,
    /// Pod name -> the message its first container left when it terminated, as last seen.
    messages: BTreeMap<String, String>,
    /// The watch's errors: after one, a pod created and deleted before the watch resumed may
    /// have gone unseen, so no claim of "none" is made.
    errors: Vec<String>,
    listed: bool,
}

/// A watch of a namespace's pods, recording each one it ever saw.
pub struct PodRecord {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl PodRecord {
    /// Starts the watch and returns once its first list is done (bounded at 30 s), so that
    /// every pod created after this returns is seen.
    pub async fn start(pods: Api<Pod>) -> anyhow::Result<PodRecord> {
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let shared = seen.clone();
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher::watcher(pods, watcher::Config::default()));
            while let Some(event) = events.next().await {
                let mut seen = shared.lock().unwrap();
                match event {
                    Ok(Event::Apply(pod) | Event::InitApply(pod) | Event::Delete(pod)) => {
                        let benchmark = pod
                            .labels()
                            .get("membench.io/benchmark")
                            .cloned()
                            .unwrap_or_default();
                        let message = pod
                            .status
                            .as_ref()
                            .and_then(|s| s.container_statuses.as_ref()?.first())
                            .and_then(|c| c.state.as_ref()?.terminated.as_ref()?.message.clone());
                        if let Some(message) = message {
                            seen.messages.insert(pod.name_any(), message);
                        }
                        seen.pods.insert(pod.name_any(), benchmark);
                    }
                    Ok(Event::InitDone) => seen.listed = true,
                    Ok(Event::Init) => {}
                    Err(e) => seen.errors.push(e.to_string()),
                }
            }
        });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !seen.lock().unwrap().listed {
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "the watch of the namespace's pods did not list them within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(PodRecord { seen, task })
    }

    /// Every pod of `benchmark` the namespace ever held since the watch started; an error when
    /// the watch broke off, since a pod could then have come and gone unseen.
    pub fn pods_of(&self, benchmark: &str) -> anyhow::Result<Vec<String>> {
        let seen = self.seen.lock().unwrap();
        anyhow::ensure!(
            seen.errors.is_empty(),
            "the watch of the namespace's pods broke off ({:?}): pods may have gone unseen",
            seen.errors
        );
        Ok(seen
            .pods
            .iter()
            .filter(|(_, b)| *b == benchmark)
            .map(|(name, _)| name.clone())
            .collect())
    }

    /// Every pod the namespace ever held since the watch started (see [`PodRecord::pods_of`]).
    pub fn all_pods(&self) -> anyhow::Result<Vec<String>> {
        let seen = self.seen.lock().unwrap();
        anyhow::ensure!(
            seen.errors.is_empty(),
            "the watch of the namespace's pods broke off ({:?}): pods may have gone unseen",
            seen.errors
        );
        Ok(seen.pods.keys().cloned().collect())
    }
}

impl PodRecord {
    /// The termination message `pod`'s first container left, as the watch saw it (the
    /// operator may have deleted the pod since).
    pub fn termination_message(&self, pod: &str) -> Option<String> {
        self.seen.lock().unwrap().messages.get(pod).cloned()
    }
}

impl Drop for PodRecord {
    fn drop(&mut self) {
        self.task.abort();
    }
}
