//! The prices of `spec.capacity.pricesConfigMapRef`: read from the benchmark's namespace at
//! each reconciliation, so a ConfigMap created or fixed later shows in the status at the next
//! one. A ConfigMap that is missing, lacks the key or holds a bad line gives no price, and the
//! status's capacity message says why; the benchmark goes on.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

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
