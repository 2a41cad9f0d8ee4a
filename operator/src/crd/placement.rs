//! Where the benchmark pods may run: node labels, tolerations and affinity.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Toleration};
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::formats::{LABEL_KEY, LABEL_KEY_MAX, LABEL_VALUE, LABEL_VALUE_MAX, message};

/// Where benchmark pods may run, besides the instance type.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSpec {
    /// Extra node labels the node must carry (added to the instance type and arch), at most 16.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    // Bounded keys, values and size keep the CEL cost estimate of the rules below in budget.
    #[schemars(extend("maxProperties" = 16, "additionalProperties" = {"type": "string", "maxLength": 63}))]
    #[x_kube(validation = Rule::new(format!("self.all(k, size(k) <= {LABEL_KEY_MAX} && k.matches('{LABEL_KEY}'))")).message(message::NODE_SELECTOR_KEY))]
    #[x_kube(validation = Rule::new(format!("self.all(k, size(self[k]) <= {LABEL_VALUE_MAX} && self[k].matches('{LABEL_VALUE}'))")).message(message::NODE_SELECTOR_VALUE))]
    pub node_selector: BTreeMap<String, String>,

    /// Tolerations, for benchmark node pools that are tainted so nothing else lands there
    /// (at most 16).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub tolerations: Vec<TolerationSpec>,

    /// Node affinity and pod affinity added to the engine pod (membench adds its own
    /// anti-affinity so two benchmarks never share a node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
}

/// A toleration of the benchmark pods, checked at admission the way the pod API checks it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')").message(message::TOLERATION_EMPTY_KEY).field_path(".operator"))]
#[x_kube(validation = Rule::new("!(has(self.operator) && self.operator == 'Exists') || !has(self.value) || self.value == ''").message(message::TOLERATION_EXISTS_VALUE).field_path(".value"))]
#[x_kube(validation = Rule::new("!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')").message(message::TOLERATION_SECONDS).field_path(".effect"))]
pub struct TolerationSpec {
    /// The taint key to tolerate; empty (with operator `Exists`) tolerates every taint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 317))]
    #[x_kube(validation = Rule::new(format!("self == '' || self.matches('{LABEL_KEY}')")).message(message::TOLERATION_KEY))]
    pub key: Option<String>,

    /// `Equal` (the default: the taint's value must equal `value`) or `Exists` (any value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Equal", "Exists"]))]
    pub operator: Option<String>,

    /// The taint value to tolerate, with operator `Equal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(format!("self.matches('{LABEL_VALUE}')")).message(message::TOLERATION_VALUE))]
    pub value: Option<String>,

    /// The taint effect to tolerate: `NoSchedule`, `PreferNoSchedule` or `NoExecute`; empty
    /// tolerates every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["", "NoSchedule", "PreferNoSchedule", "NoExecute"]))]
    pub effect: Option<String>,

    /// With effect `NoExecute`: how long the pod stays on a node once the taint appears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

impl From<&TolerationSpec> for Toleration {
    fn from(t: &TolerationSpec) -> Self {
        Toleration {
            key: t.key.clone(),
            operator: t.operator.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
            toleration_seconds: t.toleration_seconds,
        }
    }
}
