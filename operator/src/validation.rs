//! Spec validation, shared by the local runner and the operator. [`validate_spec`] checks the
//! schema's limits and CEL rules with the same wording (a local run has no API server to do
//! it); [`validate`] adds what only matters in a cluster (label-sized names, memory quantities)
//! and works out each engine's pod memory. Pure and I/O-free.

use crate::crd::{EngineKind, MemoryBenchmark, RecordLayout};
use crate::workload::Workload;

const MIB: u64 = 1 << 20;

/// A spec the operator can run: its workload and each engine's pod memory, in bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidSpec {
    pub workload: Workload,
    pub engine_memory: Vec<u64>,
}

/// Checks a benchmark; the error names the field and says what to change.
pub fn validate(benchmark: &MemoryBenchmark) -> Result<ValidSpec, String> {
    let name = benchmark.metadata.name.as_deref().unwrap_or_default();
    // The name is a label value on every pod (`membench.io/benchmark`), and pod names add a
    // suffix such as `-12-client-3`.
    if name.len() > 48 {
        return Err(format!(
            "metadata.name '{name}' is {} characters: the operator needs at most 48, since it labels and names the benchmark's pods after it",
            name.len()
        ));
    }
    validate_spec(benchmark)?;
    let workload = Workload::from_spec(&benchmark.spec.workload).map_err(|e| e.to_string())?;
    let engine_memory = benchmark
        .spec
        .engines
        .iter()
        .enumerate()
        .map(|(i, engine)| match &engine.memory {
            Some(quantity) => {
                let bytes = parse_memory_quantity(quantity).ok_or_else(|| {
                    format!(
                        "spec.engines[{i}].memory '{quantity}' is not a memory quantity such as 512Mi, 16Gi or 2G"
                    )
                })?;
                if bytes < 16 * MIB {
                    return Err(format!(
                        "spec.engines[{i}].memory '{quantity}' is below 16Mi, too little for any engine to start"
                    ));
                }
                Ok(bytes)
            }
            None => Ok(estimated_engine_memory(&workload, engine.engine)),
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(ValidSpec {
        workload,
        engine_memory,
    })
}

/// The schema's limits and CEL rules, checked locally with the same wording.
pub fn validate_spec(benchmark: &MemoryBenchmark) -> Result<(), String> {
    let spec = &benchmark.spec;
    let limit = |field: &str, value: u64, min: u64, max: u64| {
        if value < min || value > max {
            Err(format!(
                "spec.{field} is {value}: it must be between {min} and {max}"
            ))
        } else {
            Ok(())
        }
    };
    if spec.engines.is_empty() {
        return Err(
            "spec.engines is empty: name at least one engine (redis, valkey or dragonfly)".into(),
        );
    }
    limit("repetitions", spec.repetitions.into(), 1, 100)?;
    limit("pipeline", spec.pipeline.into(), 1, 100_000)?;
    limit("settleSeconds", spec.settle_seconds.into(), 0, 3600)?;
    let mut names = std::collections::BTreeSet::new();
    for (i, engine) in spec.engines.iter().enumerate() {
        let valid_version = !engine.version.is_empty()
            && engine.version.split('.').count() <= 3
            && engine
                .version
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if !valid_version {
            return Err(format!(
                "spec.engines[{i}].version '{}' is not a version like 7.0.15 or 9.1",
                engine.version
            ));
        }
        if !names.insert(engine.display_name()) {
            return Err(format!(
                "spec.engines[{i}] is a second '{}': give entries with the same engine and version a different engines[].name",
                engine.display_name()
            ));
        }
    }
    let workload = Workload::from_spec(&spec.workload).map_err(|e| e.to_string())?;
    if let Some(table) = spec.published_table {
        table.table().check_workload(&workload)?;
    }
    Ok(())
}

/// Bytes of a Kubernetes memory quantity (`512Mi`, `16Gi`, `2G`, `1e9`, `1000000`).
pub fn parse_memory_quantity(quantity: &str) -> Option<u64> {
    let quantity = quantity.trim();
    let split = quantity
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(quantity.len());
    let (number, suffix) = quantity.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor: f64 = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0f64.powi(4),
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse().ok()?),
        _ => return None,
    };
    let bytes = number * factor;
    (bytes.is_finite() && bytes >= 0.0).then(|| bytes.ceil() as u64)
}

/// A memory quantity in whole mebibytes, rounded up (`1536Mi`).
pub fn mebibytes(bytes: u64) -> String {
    format!("{}Mi", bytes.div_ceil(MIB))
}

/// Memory for an engine pod when the spec names none: a generous guess of the data's size
/// (about 1.5 times what the published runs measured per item, since RSS exceeds used_memory
/// and hash tables double while they grow) plus room for the server itself. Dragonfly refuses
/// to start with less than 256 MiB per thread, so it gets at least 1 GiB.
pub fn estimated_engine_memory(workload: &Workload, engine: EngineKind) -> u64 {
    let data: u64 = match workload {
        Workload::SortedSet { members, .. } => members.saturating_mul(150),
        Workload::RandomStrings {
            requests,
            keyspace,
            value_size,
            ..
        } => (*requests)
            .min(*keyspace)
            .saturating_mul(u64::from(*value_size) + 100),
        Workload::Strings { keys, value_size } => keys.saturating_mul(u64::from(*value_size) + 100),
        Workload::Records {
            records,
            layout: RecordLayout::Hash,
            fields,
        } => records.saturating_mul(fields.len() as u64 * 40 + 150),
        Workload::Records {
            records,
            layout: RecordLayout::Strings,
            fields,
        } => records.saturating_mul(fields.len() as u64 * 120),
    };
    let base = match engine {
        EngineKind::Dragonfly => 1024 * MIB,
        _ => 256 * MIB,
    };
    let bytes = base.saturating_add(data.saturating_mul(3) / 2);
    bytes.div_ceil(MIB) * MIB
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::parse_specs;

    fn benchmark(name: &str, engines: &str) -> MemoryBenchmark {
        parse_specs(&format!(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: {name}}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: {engines}\n  workload: {{sortedSet: {{members: 1000000}}}}\n"
        ))
        .unwrap()
        .remove(0)
    }

    #[test]
    fn quantities_in_binary_and_decimal_units() {
        assert_eq!(parse_memory_quantity("512Mi"), Some(512 << 20));
        assert_eq!(parse_memory_quantity("16Gi"), Some(16 << 30));
        assert_eq!(parse_memory_quantity("2G"), Some(2_000_000_000));
        assert_eq!(parse_memory_quantity("1.5Gi"), Some(3 << 29));
        assert_eq!(parse_memory_quantity("1e9"), Some(1_000_000_000));
        assert_eq!(parse_memory_quantity("100"), Some(100));
        assert_eq!(parse_memory_quantity("lots"), None);
        assert_eq!(parse_memory_quantity("12Qi"), None);
    }

    #[test]
    fn memory_defaults_to_an_estimate_from_the_workload() {
        let valid = validate(&benchmark("zset", "[{engine: redis, version: \"7.0.15\"}]")).unwrap();
        // 1M members at 150 B, times 1.5, plus 256 MiB.
        assert_eq!(
            valid.engine_memory,
            vec![(256 << 20) + 225_000_000u64.div_ceil(1 << 20) * (1 << 20)]
        );
        let fifty_million = Workload::SortedSet {
            members: 50_000_000,
            key: "k".into(),
            sample_every: 0,
        };
        let estimate = estimated_engine_memory(&fifty_million, EngineKind::Valkey);
        assert!(estimate > 8 << 30 && estimate < 16 << 30, "{estimate}");
        assert_eq!(mebibytes(estimate), format!("{}Mi", estimate >> 20));
    }

    #[test]
    fn an_explicit_memory_is_used_as_given() {
        let valid = validate(&benchmark(
            "zset",
            "[{engine: redis, version: \"7.0.15\", memory: 2Gi}]",
        ))
        .unwrap();
        assert_eq!(valid.engine_memory, vec![2 << 30]);
    }

    #[test]
    fn a_bad_memory_quantity_names_the_field() {
        let err = validate(&benchmark(
            "zset",
            "[{engine: redis, version: \"7.0.15\"}, {engine: valkey, version: \"9.1.2\", memory: plenty}]",
        ))
        .unwrap_err();
        assert!(err.contains("spec.engines[1].memory"), "{err}");
        let err = validate(&benchmark(
            "zset",
            "[{engine: redis, version: \"7.0.15\", memory: 1Mi}]",
        ))
        .unwrap_err();
        assert!(err.contains("16Mi"), "{err}");
    }

    #[test]
    fn a_name_too_long_for_pod_labels_is_rejected() {
        let long = "a".repeat(60);
        let err =
            validate(&benchmark(&long, "[{engine: redis, version: \"7.0.15\"}]")).unwrap_err();
        assert!(err.contains("metadata.name") && err.contains("48"), "{err}");
    }
}
