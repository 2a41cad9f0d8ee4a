//! The prices of `spec.capacity.pricesConfigMapRef`: read from the benchmark's namespace at
//! each reconciliation. The controller watches ConfigMaps and reconciles the benchmarks that
//! name one ([`benchmarks_naming`]) when it is created, changed or deleted, so prices given or
//! fixed later reach a benchmark still waiting for them and one already finished (its costs
//! recomputed from the results in its status, nothing measured again). A ConfigMap that is
//! missing, lacks the key or holds a bad line gives no price, and the status's capacity
//! message says why; the benchmark goes on.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, ResourceExt};

use crate::capacity::Prices;
use crate::crd::MemoryBenchmark;

/// The benchmark's prices, when its spec names a ConfigMap: the prices, or why there are none.
pub(super) async fn read(
    client: &Client,
    namespace: &str,
    benchmark: &MemoryBenchmark,
) -> Option<Result<Prices, String>> {
    let reference = benchmark
        .spec
        .capacity
        .as_ref()?
        .prices_config_map_ref
        .as_ref()?;
    let source = format!(
        "ConfigMap {namespace}/{} key {}",
        reference.name, reference.key
    );
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let prices = match api.get_opt(&reference.name).await {
        Err(e) => Err(format!("cannot read the {source}: {e}")),
        Ok(None) => Err(format!(
            "no {source}: create it with the prices as CSV lines instanceType,hourlyUSD"
        )),
        Ok(Some(config_map)) => {
            match config_map.data.as_ref().and_then(|d| d.get(&reference.key)) {
                None => Err(format!(
                    "the {source} is missing: put the prices under that key"
                )),
                Some(text) => Prices::parse(&source, text),
            }
        }
    };
    Some(prices)
}

/// The benchmarks among `benchmarks` whose `spec.capacity.pricesConfigMapRef` names
/// `config_map` (same namespace, same name): the ones a change of it concerns.
pub(crate) fn benchmarks_naming(
    benchmarks: &[Arc<MemoryBenchmark>],
    config_map: &ConfigMap,
) -> Vec<ObjectRef<MemoryBenchmark>> {
    let namespace = config_map.namespace();
    let name = config_map.name_any();
    benchmarks
        .iter()
        .filter(|b| b.namespace() == namespace)
        .filter(|b| {
            b.spec
                .capacity
                .as_ref()
                .and_then(|c| c.prices_config_map_ref.as_ref())
                .is_some_and(|r| r.name == name)
        })
        .map(|b| ObjectRef::from_obj(b.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn benchmark(namespace: &str, name: &str, capacity: serde_json::Value) -> Arc<MemoryBenchmark> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "membench.io/v1alpha1",
                "kind": "MemoryBenchmark",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "instanceType": "r8g.4xlarge",
                    "engines": [{"engine": "redis", "version": "8.2"}],
                    "workload": {"sortedSet": {"members": 1000}},
                    "capacity": capacity,
                },
            }))
            .unwrap(),
        )
    }

    #[test]
    fn a_config_map_concerns_the_benchmarks_of_its_namespace_that_name_it() {
        let priced =
            serde_json::json!({"items": 1000, "pricesConfigMapRef": {"name": "node-prices"}});
        let benchmarks = [
            benchmark("a", "uses-it", priced.clone()),
            benchmark("b", "other-namespace", priced),
            benchmark(
                "a",
                "other-map",
                serde_json::json!({"items": 1000, "pricesConfigMapRef": {"name": "mine"}}),
            ),
            benchmark("a", "no-prices", serde_json::json!({"items": 1000})),
        ];
        let config_map: ConfigMap = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "node-prices", "namespace": "a"}}),
        )
        .unwrap();
        let names: Vec<String> = benchmarks_naming(&benchmarks, &config_map)
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["uses-it"]);
    }
}
