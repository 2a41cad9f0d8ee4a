//! The placement every benchmark pod gets from the operator, before its spec's own: the
//! tolerations and node labels of a platform team's benchmark node pool
//! (`--benchmark-tolerations`, `--benchmark-node-selector`; chart values
//! `benchmarkPods.tolerations` and `benchmarkPods.nodeSelector`), so that specs written for any
//! cluster (the unedited examples) run on a tainted pool. Parsed and checked once at operator
//! start (the CRD's own rules, and no toleration of every taint unless
//! `--allow-tolerate-everything`), then merged into each pod with `spec.placement` winning on
//! the same label key and the same toleration key. Pure.

use std::collections::BTreeMap;

use crate::crd::{PlacementSpec, TolerationSpec};
use crate::validation::check_placement;

const TOLERATIONS_ORIGIN: &str = "--benchmark-tolerations (chart value benchmarkPods.tolerations)";
const NODE_SELECTOR_ORIGIN: &str =
    "--benchmark-node-selector (chart value benchmarkPods.nodeSelector)";

/// The operator's tolerations for every benchmark pod, from `--benchmark-tolerations`: a JSON
/// list of tolerations as a pod takes them (`[{"key": "membench.io/benchmark", "operator":
/// "Equal", "value": "true", "effect": "NoSchedule"}]`). Each is checked as the CRD checks
/// `spec.placement.tolerations`; one without a key (operator `Exists`, tolerating every taint)
/// only with `allow_tolerate_everything`.
pub fn parse_tolerations(
    json: &str,
    allow_tolerate_everything: bool,
) -> Result<Vec<TolerationSpec>, String> {
    if json.trim().is_empty() {
        return Ok(Vec::new());
    }
    let tolerations: Vec<TolerationSpec> = serde_json::from_str(json).map_err(|e| {
        format!(
            "{TOLERATIONS_ORIGIN}: not a JSON list of tolerations ({e}); give for example [{{\"key\":\"membench.io/benchmark\",\"operator\":\"Equal\",\"value\":\"true\",\"effect\":\"NoSchedule\"}}]"
        )
    })?;
    let placement = PlacementSpec {
        tolerations,
        ..Default::default()
    };
    check_placement(&placement, TOLERATIONS_ORIGIN)?;
    if !allow_tolerate_everything {
        for (i, toleration) in placement.tolerations.iter().enumerate() {
            if toleration.key.as_deref().unwrap_or_default().is_empty() {
                return Err(format!(
                    "{TOLERATIONS_ORIGIN}[{i}] tolerates every taint (operator Exists without a key), which would put every benchmark pod onto control-plane and other reserved nodes; name the taint key of your benchmark nodes (for example membench.io/benchmark), or allow it with the chart value allowTolerateEverything: true (flag --allow-tolerate-everything)"
                ));
            }
        }
    }
    Ok(placement.tolerations)
}

/// The operator's extra node labels for every benchmark pod, from `--benchmark-node-selector`
/// `KEY=VALUE,...` (already split at the commas), checked as `spec.placement.nodeSelector`.
pub fn parse_node_selector(pairs: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut selector = BTreeMap::new();
    for pair in pairs.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!(
                "{NODE_SELECTOR_ORIGIN}: '{pair}' is not KEY=VALUE; give for example membench.io/pool=benchmarks"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if selector
            .insert(key.to_string(), value.to_string())
            .is_some()
        {
            return Err(format!(
                "{NODE_SELECTOR_ORIGIN}: the label {key} is given twice; give each label once"
            ));
        }
    }
    let placement = PlacementSpec {
        node_selector: selector,
        ..Default::default()
    };
    check_placement(&placement, NODE_SELECTOR_ORIGIN)?;
    Ok(placement.node_selector)
}

/// The node labels a benchmark pod requires besides its instance type and arch: the
/// operator's, then the spec's, which win on the same key.
pub fn merged_node_selector(
    defaults: &BTreeMap<String, String>,
    placement: Option<&PlacementSpec>,
) -> BTreeMap<String, String> {
    let mut selector = defaults.clone();
    if let Some(placement) = placement {
        selector.extend(placement.node_selector.clone());
    }
    selector
}

/// The tolerations of a benchmark pod: the operator's whose key the spec does not tolerate
/// itself, then the spec's (so the spec's word on a taint key replaces the operator's).
pub fn merged_tolerations(
    defaults: &[TolerationSpec],
    placement: Option<&PlacementSpec>,
) -> Vec<TolerationSpec> {
    let own: &[TolerationSpec] = placement.map_or(&[], |p| &p.tolerations);
    let key = |t: &TolerationSpec| t.key.clone().unwrap_or_default();
    defaults
        .iter()
        .filter(|d| !own.iter().any(|o| key(o) == key(d)))
        .chain(own)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toleration(key: &str, value: &str, effect: &str) -> TolerationSpec {
        TolerationSpec {
            key: Some(key.into()),
            operator: Some("Equal".into()),
            value: Some(value.into()),
            effect: Some(effect.into()),
            toleration_seconds: None,
        }
    }

    #[test]
    fn tolerations_are_read_from_json_as_a_pod_takes_them() {
        let parsed = parse_tolerations(
            r#"[{"key":"membench.io/benchmark","operator":"Equal","value":"true","effect":"NoSchedule"}]"#,
            false,
        )
        .unwrap();
        assert_eq!(
            parsed,
            [toleration("membench.io/benchmark", "true", "NoSchedule")]
        );
        assert_eq!(parse_tolerations("", false).unwrap(), []);
        assert_eq!(parse_tolerations("[]", false).unwrap(), []);
    }

    #[test]
    fn a_default_toleration_of_every_taint_is_refused_naming_the_setting_unless_allowed() {
        let everything = r#"[{"operator":"Exists"}]"#;
        let err = parse_tolerations(everything, false).unwrap_err();
        assert!(
            err.contains("benchmarkPods.tolerations")
                && err.contains("tolerates every taint")
                && err.contains("allowTolerateEverything: true")
                && err.contains("--allow-tolerate-everything"),
            "{err}"
        );
        assert_eq!(parse_tolerations(everything, true).unwrap().len(), 1);
    }

    #[test]
    fn bad_default_tolerations_are_refused_with_the_crds_words() {
        for (json, why) in [
            ("{not json", "not a JSON list of tolerations"),
            (r#"{"key":"a"}"#, "not a JSON list of tolerations"),
            (
                r#"[{"key":"a b","operator":"Exists"}]"#,
                "a toleration key must be a label key",
            ),
            (
                r#"[{"key":"a","operator":"Exists","value":"x"}]"#,
                "must not have a value",
            ),
            (
                r#"[{"key":"a","operator":"Equal","value":"x","tolerationSeconds":5}]"#,
                "tolerationSeconds needs effect NoExecute",
            ),
            (r#"[{"key":"a","operator":"Near"}]"#, "Equal, Exists"),
        ] {
            let err = parse_tolerations(json, false).unwrap_err();
            assert!(
                err.contains(why) && err.contains("--benchmark-tolerations"),
                "{json}: {err}"
            );
        }
    }

    #[test]
    fn node_selector_pairs_are_checked_as_node_labels() {
        let pairs = |s: &str| s.split(',').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            parse_node_selector(&pairs("membench.io/pool=benchmarks, team=perf")).unwrap(),
            BTreeMap::from([
                ("membench.io/pool".to_string(), "benchmarks".to_string()),
                ("team".to_string(), "perf".to_string())
            ])
        );
        assert!(parse_node_selector(&pairs("")).unwrap().is_empty());
        for (bad, why) in [
            ("pool", "is not KEY=VALUE"),
            ("a=1,a=2", "given twice"),
            ("bad key=x", "nodeSelector keys must be label keys"),
            ("pool=not ok", "nodeSelector values must be label values"),
        ] {
            let err = parse_node_selector(&pairs(bad)).unwrap_err();
            assert!(
                err.contains(why) && err.contains("benchmarkPods.nodeSelector"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn the_spec_wins_on_the_same_label_key_and_the_same_toleration_key() {
        let defaults = BTreeMap::from([
            ("membench.io/pool".to_string(), "benchmarks".to_string()),
            ("team".to_string(), "perf".to_string()),
        ]);
        let placement = PlacementSpec {
            node_selector: BTreeMap::from([("team".to_string(), "storage".to_string())]),
            tolerations: vec![toleration("membench.io/benchmark", "graviton", "NoExecute")],
            affinity: None,
        };
        assert_eq!(
            merged_node_selector(&defaults, Some(&placement)),
            BTreeMap::from([
                ("membench.io/pool".to_string(), "benchmarks".to_string()),
                ("team".to_string(), "storage".to_string())
            ])
        );
        assert_eq!(merged_node_selector(&defaults, None), defaults);
        let default_tolerations = [
            toleration("membench.io/benchmark", "true", "NoSchedule"),
            toleration("dedicated", "perf", "NoSchedule"),
        ];
        assert_eq!(
            merged_tolerations(&default_tolerations, Some(&placement)),
            [
                toleration("dedicated", "perf", "NoSchedule"),
                toleration("membench.io/benchmark", "graviton", "NoExecute"),
            ]
        );
        assert_eq!(
            merged_tolerations(&default_tolerations, None),
            default_tolerations
        );
    }
}
