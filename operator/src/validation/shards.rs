//! The checks of `engines[].shards` (a sharded cluster of N nodes), shared by the local runner
//! and the operator: at least 2 and at most [`MAX_SHARDS`] shards, Redis or Valkey, a workload
//! whose data spreads over keys, and no `clusterMode: false` beside it. Each message names the
//! entry and says what to write instead.

use serde_json::Value;

use crate::client::connection::shards::MAX_SHARDS;
use crate::client::workloads::workload::Workload;
use crate::crd::{EngineKind, EngineSpec};

/// Checks entry `index`'s `shards` against the engine and the workload.
pub fn check_shards(index: usize, engine: &EngineSpec, workload: &Workload) -> Result<(), String> {
    let Some(shards) = engine.shards else {
        return Ok(());
    };
    let entry = format!("spec.engines[{index}] ({})", engine.display_name());
    if shards < 2 {
        return Err(format!(
            "{entry}: shards is {shards}: a sharded cluster has at least 2 shards; for one node in cluster mode write clusterMode: true and leave shards out"
        ));
    }
    if shards as usize > MAX_SHARDS {
        return Err(format!(
            "{entry}: shards is {shards}: membench joins at most {MAX_SHARDS} shards; ask for {MAX_SHARDS} or fewer"
        ));
    }
    if engine.engine == EngineKind::Dragonfly {
        return Err(format!(
            "{entry}: shards is set, but Dragonfly has no multi-node cluster membench can join (its cluster mode is emulated on one node, or managed by an outside control plane); write clusterMode: true for its emulated one-node cluster, or use Redis or Valkey for shards"
        ));
    }
    if let Workload::SortedSet { key, .. } = workload {
        return Err(format!(
            "{entry}: shards is {shards}, but the sorted-set workload is one key ('{key}'), and a key lives on one shard: all of the data would land on one of the {shards}, the others would stay empty; measure it with clusterMode: true on one node, or load strings, randomStrings, records or a profile through the shards"
        ));
    }
    Ok(())
}

/// Refuses `clusterMode: false` written beside `shards` in a spec document (JSON or the YAML
/// it was read from): `clusterMode` is a plain bool, so once parsed an explicit `false` cannot
/// be told from one left out, which `shards` turns into cluster mode. The operator can call it
/// on the object it is given.
pub fn refuse_cluster_mode_off_with_shards(document: &Value) -> Result<(), String> {
    let engines = document
        .get("spec")
        .and_then(|spec| spec.get("engines"))
        .and_then(Value::as_array);
    for (index, engine) in engines.into_iter().flatten().enumerate() {
        let shards = engine.get("shards").filter(|s| !s.is_null());
        if let (Some(shards), Some(Value::Bool(false))) = (shards, engine.get("clusterMode")) {
            return Err(format!(
                "spec.engines[{index}]: clusterMode is false, but shards is {shards}: a sharded cluster runs in cluster mode; remove clusterMode (shards implies it), or remove shards for one standalone node"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings() -> Workload {
        Workload::Strings {
            keys: 10,
            value_size: 10,
        }
    }

    fn sharded(engine: EngineKind, shards: u32) -> EngineSpec {
        EngineSpec {
            shards: Some(shards),
            ..EngineSpec::new(engine, "9.1")
        }
    }

    #[test]
    fn shards_are_two_to_the_cap_of_redis_or_valkey() {
        assert!(check_shards(0, &sharded(EngineKind::Valkey, 3), &strings()).is_ok());
        assert!(check_shards(0, &sharded(EngineKind::Redis, 16), &strings()).is_ok());
        let one = check_shards(1, &sharded(EngineKind::Valkey, 1), &strings()).unwrap_err();
        assert!(
            one.contains("spec.engines[1] (valkey-9.1)") && one.contains("clusterMode: true"),
            "{one}"
        );
        assert!(check_shards(0, &sharded(EngineKind::Valkey, 0), &strings()).is_err());
        let many = check_shards(0, &sharded(EngineKind::Valkey, 17), &strings()).unwrap_err();
        assert!(many.contains("at most 16"), "{many}");
        let dragonfly =
            check_shards(0, &sharded(EngineKind::Dragonfly, 2), &strings()).unwrap_err();
        assert!(
            dragonfly.contains("Dragonfly has no multi-node cluster"),
            "{dragonfly}"
        );
    }

    #[test]
    fn a_one_key_workload_is_refused_saying_why() {
        let sorted_set = Workload::SortedSet {
            members: 10,
            key: "membench:zset".into(),
            sample_every: 0,
        };
        let err = check_shards(0, &sharded(EngineKind::Valkey, 3), &sorted_set).unwrap_err();
        assert!(
            err.contains("one key") && err.contains("land on one of the 3"),
            "{err}"
        );
    }

    #[test]
    fn cluster_mode_written_false_beside_shards_is_refused() {
        let doc =
            |engine: Value| serde_json::json!({"spec": {"engines": [{"engine": "redis"}, engine]}});
        let off = doc(serde_json::json!({"engine": "valkey", "shards": 3, "clusterMode": false}));
        let err = refuse_cluster_mode_off_with_shards(&off).unwrap_err();
        assert!(
            err.contains("spec.engines[1]") && err.contains("remove clusterMode"),
            "{err}"
        );
        for fine in [
            serde_json::json!({"engine": "valkey", "shards": 3}),
            serde_json::json!({"engine": "valkey", "shards": 3, "clusterMode": true}),
            serde_json::json!({"engine": "valkey", "clusterMode": false}),
        ] {
            assert!(refuse_cluster_mode_off_with_shards(&doc(fine)).is_ok());
        }
    }
}
