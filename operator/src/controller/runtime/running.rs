//! Running the controller: over which namespaces (`Scope`), until the process is asked to
//! stop, alone or as the elected one of several replicas (`run_elected`, with [`super::leader`]),
//! and the pruning of what deleted benchmarks left in the metrics.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams};
use kube::runtime::controller::Controller;
use kube::runtime::watcher;
use kube::{Client, Resource};
use tracing::{info, warn};

use crate::controller::build::pods;
use crate::controller::context::Context;
use crate::controller::decide::observation::Settings;
use crate::controller::read::capacity_prices;
use crate::controller::reconcile::{error_policy, reconcile};
use crate::controller::runtime::leader;
use crate::controller::write::{release, release_orphans};
use crate::crd::MemoryBenchmark;
use crate::metrics::Metrics;

/// Where the operator watches.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// The namespaces to watch; every namespace when empty.
    pub namespaces: Vec<String>,
}

impl Scope {
    /// One namespace.
    pub fn namespace(namespace: &str) -> Self {
        Self {
            namespaces: vec![namespace.to_string()],
        }
    }

    /// The benchmark and pod APIs to watch: one pair per namespace, or one for all.
    fn apis(&self, client: &Client) -> Vec<(Api<MemoryBenchmark>, Api<Pod>)> {
        self.each(client)
    }

    /// One API of a kind per namespace, or one for all.
    fn each<K, L>(&self, client: &Client) -> Vec<(Api<K>, Api<L>)>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        L: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
        L::DynamicType: Default,
    {
        if self.namespaces.is_empty() {
            return vec![(Api::all(client.clone()), Api::all(client.clone()))];
        }
        self.namespaces
            .iter()
            .map(|ns| {
                (
                    Api::namespaced(client.clone(), ns),
                    Api::namespaced(client.clone(), ns),
                )
            })
            .collect()
    }
}

/// Runs the controller until the process is asked to stop (SIGTERM, Ctrl-C) or `shutdown`
/// resolves. `ready` turns true once the MemoryBenchmark API answers. With several namespaces
/// in `scope`, one controller watches each (namespaced watches need no cluster-wide rights) and
/// they share one context, so the queue on a node pool sees the benchmarks of all of them.
pub async fn run(
    client: Client,
    scope: Scope,
    settings: Settings,
    metrics: Metrics,
    ready: Arc<AtomicBool>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    use futures::FutureExt;
    let apis = scope.apis(&client);
    for (benchmarks, _) in &apis {
        check_api(benchmarks).await?;
    }
    ready.store(true, Ordering::SeqCst);
    let config_maps = scope.each::<ConfigMap, ConfigMap>(&client);
    let controllers: Vec<_> = apis
        .iter()
        .zip(config_maps)
        .map(|((benchmarks, pods), (config_maps, _))| {
            let controller = Controller::new(
                benchmarks.clone(),
                watcher::Config::default().any_semantic(),
            );
            let controller = controller.owns(
                pods.clone(),
                watcher::Config::default().labels(&pods::managed_pods_selector()),
            );
            // A prices ConfigMap created, fixed or changed later reaches the benchmarks that
            // name it, finished ones too: their costs are recomputed from the saved results.
            let store = controller.store();
            let controller = controller.watches(
                config_maps,
                watcher::Config::default().any_semantic(),
                move |config_map| capacity_prices::benchmarks_naming(&store.state(), &config_map),
            );
            (controller.store(), controller)
        })
        .collect();
    let stores = controllers.iter().map(|(store, _)| store.clone()).collect();
    let ctx = Arc::new(Context::new(client, settings, metrics.clone(), stores));
    info!(
        namespaces = if scope.namespaces.is_empty() {
            "(all)".to_string()
        } else {
            scope.namespaces.join(",")
        },
        "operator started"
    );
    metrics.set_leader(true);
    // A deleted benchmark whose pods are already gone triggers no reconcile, so its series
    // are dropped by comparing the published ones with the listed benchmarks now and then.
    let _pruning = AbortOnDrop(tokio::spawn(prune_deleted_benchmarks(
        apis.clone(),
        metrics.clone(),
    )));
    let shutdown = shutdown.shared();
    let runs = controllers.into_iter().map(|(_, controller)| {
        controller
            .graceful_shutdown_on(shutdown.clone())
            .run(reconcile, error_policy, ctx.clone())
            .boxed()
    });
    futures::stream::select_all(runs)
        .for_each(|result| {
            match result {
                Ok((object, _)) => tracing::debug!(benchmark = %object.name, "reconciled"),
                Err(kube::runtime::controller::Error::ObjectNotFound(object)) => {
                    // Deleted: its series and readings go with it, and its client pods are
                    // released so the garbage collector can finish them.
                    let namespace = object.namespace.clone().unwrap_or_default();
                    metrics.forget_benchmark(&namespace, &object.name);
                    ctx.readings.forget(&namespace, &object.name);
                    tokio::spawn(release_orphans(
                        ctx.client.clone(),
                        namespace,
                        object.name.clone(),
                    ));
                }
                Err(e) => tracing::debug!(error = %e, "controller"),
            }
            std::future::ready(())
        })
        .await;
    ready.store(false, Ordering::SeqCst);
    Ok(())
}

/// A start-up check that the MemoryBenchmark API is served, with what to do when it is not.
async fn check_api(benchmarks: &Api<MemoryBenchmark>) -> anyhow::Result<()> {
    benchmarks
        .list(&ListParams::default().limit(1))
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "the MemoryBenchmark API does not answer ({e}); is the CRD installed (kubectl apply -f crds/), and may the operator list MemoryBenchmarks there?"
            )
        })?;
    Ok(())
}

/// A task that ends with its owner (a controller dropped when its replica stops leading).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Leader election: the Lease that says which replica runs the controller, and who this
/// replica is.
#[derive(Clone, Debug)]
pub struct Election {
    /// The Lease's namespace: the operator's own.
    pub namespace: String,
    pub lease_name: String,
    /// Unique among the replicas: the pod's name.
    pub identity: String,
    pub timing: leader::LeaseTiming,
}

/// How long a replica that stops leading gives its controller to finish what it is doing.
const STOP_LEADING_GRACE: Duration = Duration::from_secs(2);

/// Runs the controller while this replica holds the leader Lease and stands by otherwise, until
/// `shutdown` resolves; the lease is then released, so a standby takes over at once. A replica
/// whose renewals fail stops its controller before the lease can expire (see [`leader`]) and
/// stands by again. `ready` is true while the MemoryBenchmark API answers, leading or standing
/// by: a standby is a healthy replica (a rolling update waits for its readiness), and the
/// `membench_operator_leader` metric and the Lease's holder say which replica leads.
pub async fn run_elected(
    client: Client,
    scope: Scope,
    settings: Settings,
    metrics: Metrics,
    ready: Arc<AtomicBool>,
    election: Election,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    for (benchmarks, _) in scope.apis(&client) {
        check_api(&benchmarks).await?;
    }
    ready.store(true, Ordering::SeqCst);
    metrics.set_leader(false);
    let (stop_all, stopping) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_all.send(true);
    });
    let leases = Api::namespaced(client.clone(), &election.namespace);
    let mut lock = leader::LeaseLock::new(
        leases,
        &election.lease_name,
        &election.identity,
        election.timing,
    );
    info!(identity = %election.identity, lease = %election.lease_name, "standing by for the leader lease");
    loop {
        let mut asked = stopping.clone();
        tokio::select! {
            _ = lock.acquire() => {}
            _ = asked.wait_for(|stop| *stop) => {
                ready.store(false, Ordering::SeqCst);
                return Ok(());
            }
        }
        info!(identity = %election.identity, "leading: running the controller");
        let (stop_controller, stopped) = tokio::sync::oneshot::channel::<()>();
        let controller = run(
            client.clone(),
            scope.clone(),
            settings.clone(),
            metrics.clone(),
            Arc::new(AtomicBool::new(false)),
            async move {
                let _ = stopped.await;
            },
        );
        tokio::pin!(controller);
        let mut asked = stopping.clone();
        let shutting_down = tokio::select! {
            result = &mut controller => {
                metrics.set_leader(false);
                if let Err(e) = lock.release().await {
                    warn!(error = %e, "cannot release the lease");
                }
                return result;
            }
            _ = lock.hold() => false,
            _ = asked.wait_for(|stop| *stop) => true,
        };
        let _ = stop_controller.send(());
        if tokio::time::timeout(STOP_LEADING_GRACE, &mut controller)
            .await
            .is_err()
        {
            warn!(
                "the controller did not stop within {} s; dropped it",
                STOP_LEADING_GRACE.as_secs()
            );
        }
        metrics.set_leader(false);
        if shutting_down {
            ready.store(false, Ordering::SeqCst);
            if let Err(e) = lock.release().await {
                warn!(error = %e, "cannot release the lease; a standby takes over once it expires");
            }
            return Ok(());
        }
        warn!(identity = %election.identity, "lost the leader lease; standing by");
    }
}

/// How often series of deleted benchmarks are looked for.
const PRUNE_INTERVAL: Duration = Duration::from_secs(15);

/// Forgets the series of benchmarks that no longer exist, and releases the client pods they
/// left (the operator may have been down when they went). A list every few seconds is cheap and
/// needs nothing from the controller's cache, so it works however the benchmark went away.
async fn prune_deleted_benchmarks(apis: Vec<(Api<MemoryBenchmark>, Api<Pod>)>, metrics: Metrics) {
    let mut ticks = tokio::time::interval(PRUNE_INTERVAL);
    'ticks: loop {
        ticks.tick().await;
        // Every watched namespace is listed before anything is dropped: a series is kept unless
        // the complete listing lacks its benchmark.
        let mut listed = Vec::new();
        for (benchmarks, _) in &apis {
            match benchmarks.list_metadata(&ListParams::default()).await {
                Ok(list) => listed.extend(list.items),
                Err(e) => {
                    warn!(error = %e, "cannot list benchmarks to drop the series of deleted ones");
                    continue 'ticks;
                }
            }
        }
        metrics.retain_benchmarks(listed.iter().map(|b| {
            (
                b.metadata.namespace.as_deref().unwrap_or_default(),
                b.metadata.name.as_deref().unwrap_or_default(),
            )
        }));
        let alive: std::collections::HashSet<&str> = listed
            .iter()
            .filter_map(|b| b.metadata.uid.as_deref())
            .collect();
        for (_, pods) in &apis {
            let held = match pods
                .list_metadata(&ListParams::default().labels(&pods::managed_pods_selector()))
                .await
            {
                Ok(list) => list.items,
                Err(e) => {
                    warn!(error = %e, "cannot list pods to release those of deleted benchmarks");
                    continue 'ticks;
                }
            };
            for pod in held {
                let holds = pod
                    .metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == pods::RESULT_FINALIZER);
                let owner_alive = pod
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.controller == Some(true) && alive.contains(r.uid.as_str()));
                // Only pods being deleted: a benchmark created after the list above may have
                // pods already, and those it still needs are not being deleted by anyone.
                let deleting = pod.metadata.deletion_timestamp.is_some();
                if holds && deleting && !owner_alive {
                    let api: Api<Pod> = Api::namespaced(
                        pods.clone().into_client(),
                        pod.metadata.namespace.as_deref().unwrap_or_default(),
                    );
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    if let Err(e) = release(&api, &name).await {
                        warn!(error = %e, "cannot release a pod of a deleted benchmark");
                    }
                }
            }
        }
    }
}
