//! A watch of a namespace's engine pods, for the claims of `spec.parallelism`: per benchmark,
//! the most engine pods that existed at once and the most that could run at once; per node,
//! every moment it held two engine pods that could run. Used by tests/parallel_runs_e2e.rs and,
//! through a `#[path]` include, by benches/parallel_matrix.rs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};

/// What a watch of the namespace's engine pods saw: per benchmark, the most engine pods that
/// existed at once; per node, every moment it held two engine pods that could run (bound, not in
/// a terminal phase).
#[derive(Default, Debug)]
pub struct EngineWatch {
    /// Engine pods that exist now: UID -> (benchmark, node once bound, running).
    pub now: BTreeMap<String, (String, Option<String>, bool)>,
    pub most_at_once: BTreeMap<String, usize>,
    pub most_running_at_once: BTreeMap<String, usize>,
    pub overlaps: Vec<String>,
    pub nodes: BTreeMap<String, BTreeSet<String>>,
}

impl EngineWatch {
    fn saw(&mut self, pod: &Pod, gone: bool) {
        let uid = pod.uid().unwrap_or_default();
        if gone {
            self.now.remove(&uid);
            return;
        }
        let benchmark = pod
            .labels()
            .get("membench.io/benchmark")
            .cloned()
            .unwrap_or_default();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let running = node.is_some() && !matches!(phase.as_str(), "Succeeded" | "Failed");
        if let Some(node) = &node {
            self.nodes
                .entry(benchmark.clone())
                .or_default()
                .insert(node.clone());
        }
        self.now
            .insert(uid, (benchmark.clone(), node.clone(), running));
        let of = |b: &str, only_running: bool| {
            self.now
                .values()
                .filter(|(x, _, r)| x == b && (!only_running || *r))
                .count()
        };
        let (all, running_now) = (of(&benchmark, false), of(&benchmark, true));
        let most = self.most_at_once.entry(benchmark.clone()).or_default();
        *most = (*most).max(all);
        let most = self.most_running_at_once.entry(benchmark).or_default();
        *most = (*most).max(running_now);
        if let Some(node) = node.filter(|_| running) {
            let on_node: Vec<&String> = self
                .now
                .iter()
                .filter(|(_, (_, n, r))| *r && n.as_deref() == Some(node.as_str()))
                .map(|(uid, _)| uid)
                .collect();
            if on_node.len() > 1 {
                self.overlaps.push(format!("{node}: {on_node:?}"));
            }
        }
    }
}

pub fn watch_engines(pods: Api<Pod>) -> (tokio::task::JoinHandle<()>, Arc<Mutex<EngineWatch>>) {
    let watch = Arc::new(Mutex::new(EngineWatch::default()));
    let shared = watch.clone();
    let task = tokio::spawn(async move {
        let config = watcher::Config::default().labels("app.kubernetes.io/component=engine");
        let mut events = std::pin::pin!(watcher::watcher(pods, config));
        while let Some(event) = events.next().await {
            let mut watch = shared.lock().unwrap();
            match event {
                Ok(Event::Apply(pod) | Event::InitApply(pod)) => watch.saw(&pod, false),
                Ok(Event::Delete(pod)) => watch.saw(&pod, true),
                Ok(Event::Init) => watch.now.clear(),
                Ok(Event::InitDone) | Err(_) => {}
            }
        }
    });
    (task, watch)
}
