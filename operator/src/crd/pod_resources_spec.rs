//! How much CPU and memory the benchmark pods ask for, besides the engine's memory
//! (`engines[].memory`, or the operator's estimate).

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::formats::{CPU_QUANTITY, MEMORY_QUANTITY, message};

/// The least memory a client pod may have.
const MIN_CLIENT_MEMORY: &str = "16Mi";

/// The engine's CPU and the client's CPU and memory (request = limit, for Guaranteed QoS).
/// Both pods run on one node (the client beside the engine, or beside shard 0), so together
/// with the engine's memory they must fit what a node of the instance type can give pods: a
/// spec that cannot is refused as DoesNotFit before any pod is created.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodResourcesSpec {
    /// CPU of each engine pod, as a Kubernetes quantity such as `2`, `4` or `1500m`. Dragonfly
    /// runs two threads unless its args set `--proactor_threads`.
    #[serde(default = "default_engine_cpu")]
    #[schemars(length(min = 1, max = 16))]
    #[x_kube(validation = Rule::new(format!("self.matches('{CPU_QUANTITY}')")).message(message::CPU_QUANTITY))]
    #[x_kube(validation = Rule::new(format!("!self.matches('{CPU_QUANTITY}') || quantity(self).isGreaterThan(quantity('0'))")).message(message::CPU_POSITIVE))]
    pub engine_cpu: String,

    /// CPU of the client pod, such as `1` or `500m`.
    #[serde(default = "default_client_cpu")]
    #[schemars(length(min = 1, max = 16))]
    #[x_kube(validation = Rule::new(format!("self.matches('{CPU_QUANTITY}')")).message(message::CPU_QUANTITY))]
    #[x_kube(validation = Rule::new(format!("!self.matches('{CPU_QUANTITY}') || quantity(self).isGreaterThan(quantity('0'))")).message(message::CPU_POSITIVE))]
    pub client_cpu: String,

    /// Memory of the client pod, such as `256Mi` (its memory does not grow with the workload).
    #[serde(default = "default_client_memory")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = Rule::new(format!("self.matches('{MEMORY_QUANTITY}')")).message(message::MEMORY_QUANTITY))]
    #[x_kube(validation = Rule::new(format!("!self.matches('{MEMORY_QUANTITY}') || quantity(self).compareTo(quantity('{MIN_CLIENT_MEMORY}')) >= 0")).message(message::CLIENT_MEMORY_MINIMUM))]
    pub client_memory: String,
}

impl Default for PodResourcesSpec {
    fn default() -> Self {
        Self {
            engine_cpu: default_engine_cpu(),
            client_cpu: default_client_cpu(),
            client_memory: default_client_memory(),
        }
    }
}

pub fn default_engine_cpu() -> String {
    "2".into()
}

pub fn default_client_cpu() -> String {
    "1".into()
}

pub fn default_client_memory() -> String {
    "256Mi".into()
}
