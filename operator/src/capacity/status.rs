//! A benchmark's capacity plan from its status, and the plan as the status carries it
//! (`status.capacity`, with the printer column's smallest instance type).

use crate::client::workloads::workload::Workload;
use crate::crd::{CapacityStatus, EngineCapacityStatus, MemoryBenchmark, RecommendedStatus};

use super::{CapacityPlan, CapacityRequest, EngineMeasurement, NotProjected, Prices, plan};

/// The plan of the engines a benchmark's status has measured so far, when its spec has
/// `capacity`, with the prices of its `pricesConfigMapRef` (or why there are none).
pub fn status_of(
    benchmark: &MemoryBenchmark,
    engines: &[crate::crd::EngineStatus],
    prices: Option<&Result<Prices, String>>,
) -> Option<CapacityStatus> {
    let capacity = benchmark.spec.capacity.as_ref()?;
    let types = benchmark.spec.instance_types();
    let types: Vec<&str> = types.iter().map(String::as_str).collect();
    let given = prices.and_then(|p| p.as_ref().ok()).cloned();
    let request = match CapacityRequest::from_spec(capacity, &types, given) {
        Ok(r) => r,
        Err(message) => {
            return Some(CapacityStatus {
                items: capacity.items,
                message: Some(message),
                ..CapacityStatus::default()
            });
        }
    };
    let workload = match Workload::from_spec(&benchmark.spec.workload) {
        Ok(w) => w,
        Err(e) => {
            return Some(CapacityStatus {
                items: capacity.items,
                message: Some(e.to_string()),
                ..CapacityStatus::default()
            });
        }
    };
    let mut measurements = Vec::new();
    let mut not_projected = Vec::new();
    for engine in engines.iter().filter(|e| !e.repetitions.is_empty()) {
        match EngineMeasurement::from_status(engine, &workload) {
            Ok(m) => measurements.push(m),
            Err(reason) => not_projected.push(NotProjected {
                name: engine.name.clone(),
                reason,
            }),
        }
    }
    let mut plan = plan(&measurements, &request);
    plan.not_projected.extend(not_projected);
    let mut messages: Vec<String> = plan
        .not_projected
        .iter()
        .map(|n| format!("{}: not projected: {}", n.name, n.reason))
        .collect();
    if let Some(Err(why)) = prices {
        messages.push(format!("no prices: {why}"));
    }
    Some(to_status(
        &plan,
        (!messages.is_empty()).then(|| messages.join("; ")),
    ))
}

/// The plan as the status carries it.
pub fn to_status(plan: &CapacityPlan, message: Option<String>) -> CapacityStatus {
    CapacityStatus {
        items: plan.items,
        instance_families: plan
            .instance_families
            .iter()
            .map(|f| f.to_string())
            .collect(),
        smallest_instance_type: plan.smallest_instance_type.clone(),
        cheapest_engine: plan
            .cheapest
            .as_ref()
            .filter(|_| plan.cheapest_tie.is_empty())
            .map(|c| c.engine.clone()),
        cheapest_tie: plan
            .cheapest_tie
            .iter()
            .map(|c| format!("{} on {}", c.engine, c.instance_type))
            .collect(),
        notes: plan.notes.clone(),
        // In a tie, the instance type only when every engine of the tie is on it.
        cheapest_instance_type: plan
            .cheapest
            .as_ref()
            .filter(|c| {
                plan.cheapest_tie
                    .iter()
                    .all(|t| t.instance_type == c.instance_type)
            })
            .map(|c| c.instance_type.clone()),
        cheapest_monthly_usd: plan.cheapest.as_ref().map(|c| c.monthly_usd),
        message,
        engines: plan
            .engines
            .iter()
            .map(|e| {
                let smallest = e.instance_types.iter().find(|f| {
                    f.instance_type.is_some() && f.instance_type == e.smallest_instance_type
                });
                EngineCapacityStatus {
                    name: e.name.clone(),
                    projected_used_memory: e.projected_used_memory,
                    projected_used_memory_low: e.projected_used_memory_band[0],
                    projected_used_memory_high: e.projected_used_memory_band[1],
                    projected_rss: e.projected_rss,
                    rss_basis: serde_json::to_value(e.rss_basis)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default(),
                    eviction_overshoot_ratio: e.eviction_overshoot_ratio,
                    snapshot_peak_ratio: e.snapshot_peak_ratio,
                    headroom_basis: serde_json::to_value(e.headroom_basis)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default(),
                    required_node_memory: e.required_node_memory,
                    smallest_instance_type: e.smallest_instance_type.clone(),
                    fill_percent: smallest
                        .and_then(|f| f.fill_percent)
                        .map(|f| (f * 10.0).round() / 10.0),
                    monthly_usd: smallest.and_then(|f| f.monthly_usd),
                    growth_rule: serde_json::to_value(e.projection.growth_rule)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default(),
                    recommended: e.recommended.as_ref().map(RecommendedStatus::from),
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{EngineStatus, GrowthPoint, RepetitionStatus};

    /// A benchmark as the API server hands it over, with `instance` (`instanceType: ...` or
    /// `instanceTypes: [...]`) and two engines.
    fn benchmark(instance: serde_json::Value) -> MemoryBenchmark {
        let mut spec = serde_json::json!({
            "engines": [{"engine": "redis", "version": "8.2"}, {"engine": "valkey", "version": "9.1"}],
            "workload": {"sortedSet": {"members": 100000, "sampleEvery": 10000}},
            "capacity": {"items": 100000000},
        });
        spec.as_object_mut()
            .unwrap()
            .extend(instance.as_object().unwrap().clone());
        serde_json::from_value(serde_json::json!({
            "apiVersion": "membench.io/v1alpha1",
            "kind": "MemoryBenchmark",
            "metadata": {"name": "b", "namespace": "n"},
            "spec": spec,
        }))
        .unwrap()
    }

    /// A measured engine of `per_entry` bytes a member (and 8 a dict bucket).
    fn measured(name: &str, engine: &str, per_entry: u64) -> EngineStatus {
        let used = |n: u64| 1_000_000 + per_entry * n + 8 * n.next_power_of_two().max(4);
        EngineStatus {
            name: name.into(),
            engine: engine.into(),
            version: Some("8.2.3".into()),
            growth: (1..=10)
                .map(|i| GrowthPoint {
                    items: i * 10_000,
                    used_memory: used(i * 10_000),
                })
                .collect(),
            repetitions: vec![RepetitionStatus {
                used_memory: used(100_000),
                used_memory_rss: used(100_000),
                items: 100_000,
                ..RepetitionStatus::default()
            }],
            ..EngineStatus::default()
        }
    }

    #[test]
    fn the_printer_columns_smallest_type_is_set_for_one_instance_type_and_for_several() {
        // 100M members at 60 B and 8 a bucket: about 7.1 GB used, 9.5 GB to the engine, which
        // r8g.large holds. With two types every engine runs on each: four runs.
        let one = serde_json::json!({"instanceType": "r8g.4xlarge"});
        let several = serde_json::json!({"instanceTypes": ["r8g.4xlarge", "r7i.4xlarge"]});
        for (instance, runs) in [(one, 2), (several, 4)] {
            let engines: Vec<EngineStatus> = (0..runs)
                .map(|run| {
                    let (name, per_entry) = if run % 2 == 0 {
                        ("redis-8.2", 100)
                    } else {
                        ("valkey-9.1", 60)
                    };
                    measured(name, "redis", per_entry + run / 2)
                })
                .collect();
            let status = status_of(&benchmark(instance.clone()), &engines, None).unwrap();
            assert_eq!(
                status.smallest_instance_type.as_deref(),
                Some("r8g.large"),
                "{instance}: {status:?}"
            );
            assert_eq!(status.engines.len(), runs as usize, "{status:?}");
        }
    }

    #[test]
    fn a_tie_on_price_is_called_a_tie_in_the_status_and_no_engine_is_named_cheapest() {
        let (plan, _) = crate::capacity::tests::three_engines_at_one_price();
        let status = to_status(&plan, None);
        assert_eq!(status.cheapest_engine, None, "{status:?}");
        assert_eq!(
            status.cheapest_tie,
            ["a on r8g.xlarge", "b on r8g.xlarge", "c on r8g.xlarge"]
        );
        // All three on one type at one price: those stand.
        assert_eq!(status.cheapest_instance_type.as_deref(), Some("r8g.xlarge"));
        assert!(status.cheapest_monthly_usd.is_some());
    }

    #[test]
    fn an_instance_type_the_table_does_not_know_is_named_in_the_status_with_what_was_planned() {
        let engines = [measured("redis-8.2", "redis", 100)];
        let status = status_of(
            &benchmark(serde_json::json!({"instanceType": "e2-highmem-8"})),
            &engines,
            None,
        )
        .unwrap();
        assert_eq!(status.notes.len(), 1, "{status:?}");
        assert!(
            status.notes[0].contains("e2-highmem-8 is not in membench's instance-type table")
                && status.notes[0].contains("the plan looks in r8g, r7g, r7i, r6g, r6i instead"),
            "{:?}",
            status.notes
        );
        // A type the table knows: nothing to say.
        let known = status_of(
            &benchmark(serde_json::json!({"instanceType": "r8g.4xlarge"})),
            &engines,
            None,
        )
        .unwrap();
        assert!(known.notes.is_empty(), "{known:?}");
    }

    #[test]
    fn a_profile_workload_is_projected_from_its_repetitions_as_in_a_local_run() {
        // 2,000 profile keys at scale 10; a fifth of the keys with a TTL.
        let mut spec = benchmark(serde_json::json!({"instanceType": "r8g.4xlarge"}));
        spec.spec.workload = serde_json::from_value(serde_json::json!({"profile": {
            "scale": 10,
            "source": {"keys": 2000},
            "groups": [{"template": "k:{n}", "type": "string", "share": 1.0,
                "keyLength": {"buckets": [[8, 8, 1]]},
                "ttl": {"share": 0.2, "millis": {"buckets": [[1000, 1000, 1]]}},
                "values": {"textLength": {"buckets": [[20, 20, 1]]}}}],
        }}))
        .unwrap();
        spec.spec.capacity.as_mut().unwrap().items = 200_000;
        let repetition = |used_memory| RepetitionStatus {
            baseline_used_memory: 900_000,
            used_memory,
            used_memory_rss: used_memory,
            items: 20_000,
            ..RepetitionStatus::default()
        };
        let engine = EngineStatus {
            name: "redis-8.2".into(),
            engine: "redis".into(),
            version: Some("8.2.3".into()),
            repetitions: vec![repetition(3_500_000), repetition(3_510_000)],
            ..EngineStatus::default()
        };
        let status = status_of(&spec, std::slice::from_ref(&engine), None).unwrap();
        assert_eq!(status.message, None, "{status:?}");
        assert_eq!(status.engines[0].growth_rule, "power-of-two-dict");
        // The same arithmetic as a local run's: the measurement of the same readings.
        let workload = Workload::from_spec(&spec.spec.workload).unwrap();
        let measurement = EngineMeasurement::from_status(&engine, &workload).unwrap();
        let request = CapacityRequest::from_spec(
            spec.spec.capacity.as_ref().unwrap(),
            &["r8g.4xlarge"],
            None,
        )
        .unwrap();
        let local = super::super::plan_engine(&measurement, &request).unwrap();
        assert_eq!(
            status.engines[0].projected_used_memory,
            local.projected_used_memory
        );
        let rebuild = measurement.rebuild.expect("a rebuild's readings");
        assert_eq!((rebuild.keys, rebuild.ttl_keys), (20_000, 4_000));
    }

    #[test]
    fn a_status_whose_first_repetition_settled_plans_rss_on_the_datas_growth_else_says_run_ratio() {
        let spec = benchmark(serde_json::json!({"instanceType": "r8g.4xlarge"}));
        // An RSS twice used_memory right after the load (the empty server's 16 MB counted as
        // if it grew with the data), where the settled data added 1.1 bytes of RSS a byte.
        let mut settled = measured("redis-8.2", "redis", 120);
        let first = &mut settled.repetitions[0];
        first.baseline_used_memory = 1_000_000;
        first.used_memory_rss = 2 * first.used_memory;
        first.baseline_used_memory_rss = Some(16_000_000);
        first.settled_used_memory = Some(first.used_memory);
        let data = first.used_memory - 1_000_000;
        first.settled_used_memory_rss = Some(16_000_000 + data * 11 / 10);
        let mut unsettled = settled.clone();
        unsettled.name = "valkey-9.1".into();
        unsettled.repetitions[0].settled_used_memory_rss = None;
        let status = status_of(&spec, &[settled, unsettled], None).unwrap();
        let (a, b) = (&status.engines[0], &status.engines[1]);
        assert_eq!(a.rss_basis, "data-growth-settled", "{status:?}");
        assert_eq!(b.rss_basis, "run-ratio", "{status:?}");
        let used = a.projected_used_memory as f64;
        let expected = 16_000_000.0 + 1.1 * (used - 1_000_000.0);
        assert!(
            (a.projected_rss as f64 - expected).abs() / expected < 1e-3,
            "{status:?}"
        );
        assert_eq!(b.projected_rss, b.projected_used_memory * 2, "{status:?}");
        assert!(
            a.required_node_memory < b.required_node_memory,
            "{status:?}"
        );
    }
}
