//! Spec validation, shared by the local runner and the operator. [`validate_spec`] checks the
//! schema's limits and CEL rules with the same wording and the same regular expressions
//! ([`crate::formats`]): a local run has no API server to do it, and the operator meets specs
//! created before the CRD carried a rule. [`validate`] also works out each engine's pod memory.
//! Pure and I/O-free, but for [`spec_file`], which reads a spec from YAML.
//!
//! It may use `client` (the workloads' sizes), `crd` and the leaves; the reports, the local
//! runner and the controller above it call it (docs/src/contributing/architecture.md, `layout_tests.rs`).

pub use crate::crd::dragonfly_memory;
pub mod engine_config;
pub mod run_plan;
#[cfg(test)]
mod run_plan_tests;
pub mod shards;
pub mod spec_file;

use crate::client::phases::SpecPhases;
use crate::client::workloads::ttl::Ttl;
use crate::client::workloads::workload::Workload;
use crate::crd::{Allocator, EngineKind, MemoryBenchmark, PlacementSpec, RecordLayout};
use crate::formats::{
    LABEL_VALUE_MAX, MAX_BENCHMARK_NAME, MAX_NODE_SELECTOR, MAX_SAMPLES, MAX_TOLERATIONS,
    MIN_SAMPLE_EVERY, is_cpu_quantity, is_image_reference, is_label_key, is_label_value,
    is_memory_quantity, message,
};

const MIB: u64 = 1 << 20;

/// A spec the operator can run: its workload and each engine's pod memory, in bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidSpec {
    pub workload: Workload,
    pub engine_memory: Vec<u64>,
    /// Each engine entry's run plan (`run_plan::entry_plan`), which its client pods receive.
    pub plans: Vec<crate::client::measurement::plan::RunPlan>,
}

/// Checks a benchmark the operator is to run; the error names the field and says what to
/// change. Beyond [`validate_spec`]: what a cluster needs and a local run does not (an
/// instance type), and what only a local run can apply (the engine fields that pick a program
/// on the machine that runs `membench run`).
pub fn validate(benchmark: &MemoryBenchmark) -> Result<ValidSpec, String> {
    // Before the spec's checks, which would read the file where the operator runs.
    refuse_local_only_workload(benchmark)?;
    validate_spec(benchmark)?;
    if benchmark.spec.instance_type.is_empty() && benchmark.spec.instance_types.is_empty() {
        return Err(format!(
            "spec.{} ({})",
            message::NO_INSTANCE_TYPE,
            message::INSTANCE_TYPE
        ));
    }
    refuse_local_only_fields(benchmark)?;
    let workload = Workload::from_spec(&benchmark.spec.workload).map_err(|e| e.to_string())?;
    // validate_spec checked every given quantity.
    let engine_memory = benchmark
        .spec
        .engines
        .iter()
        .map(|engine| match &engine.memory {
            Some(quantity) => parse_memory_quantity(quantity).unwrap_or(u64::MAX),
            None if engine.engine == EngineKind::Dragonfly => {
                estimated_engine_memory(&workload, engine.engine).max(
                    dragonfly_memory::minimum_limit(dragonfly_memory::threads(engine)),
                )
            }
            // Each shard holds its share of the data (the slots split evenly), beside the
            // fixed part every engine needs.
            None => match engine.shards {
                Some(shards) => estimated_shard_memory(&workload, engine.engine, shards),
                None => estimated_engine_memory(&workload, engine.engine),
            },
        })
        .collect();
    // The operator's clients judge repetitions by the default thresholds, as `membench run`
    // does without --max-memory-cv and --max-rate-cv.
    let plans = (0..benchmark.spec.engines.len())
        .map(|entry| {
            run_plan::entry_plan(
                &benchmark.spec,
                &workload,
                entry,
                crate::stats::StabilityThresholds::default(),
            )
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    Ok(ValidSpec {
        workload,
        engine_memory,
        plans,
    })
}

/// The engine fields only `membench run` applies, and what a cluster offers instead.
/// (`allocator: jemalloc` means the same in a cluster, where the official Redis and Valkey
/// images have jemalloc.)
const LOCAL_ONLY_FIELDS: [(&str, &str); 3] = [
    (
        "binary",
        "it names a program on the machine that runs membench run; in a cluster set engines[].image to an image of that build",
    ),
    (
        "build",
        "it picks an engine store build on the machine that runs membench run; in a cluster set engines[].image to an image of that build",
    ),
    (
        "ldPreload",
        "it preloads a library into a program on the machine that runs membench run; in a cluster set engines[].image to an image built with it",
    ),
];

/// Refuses an RDB file the cluster cannot reach (a path on the machine that runs
/// `membench run`), and an RDB file in a claim without each engine's memory: the operator
/// cannot read the file to size the engines, the client pod reads it and refuses a file that
/// will not fit before writing anything.
fn refuse_local_only_workload(benchmark: &MemoryBenchmark) -> Result<(), String> {
    let Some(rdb) = &benchmark.spec.workload.rdb else {
        return Ok(());
    };
    if let Some(why) = &rdb.unresolved {
        return Err(why.clone());
    }
    let place = match (&rdb.persistent_volume_claim, &rdb.url) {
        (Some(claim), _) => format!("in PersistentVolumeClaim {}", claim.claim_name),
        (None, Some(_)) => "at spec.workload.rdb.url".to_string(),
        (None, None) => {
            return Err(format!(
                "spec.workload.rdb has no persistentVolumeClaim and no url, and {} is a path on the machine that runs membench run, which a client pod cannot read: put the file in a PersistentVolumeClaim and set spec.workload.rdb.persistentVolumeClaim.claimName to it (path is then the file's path inside the claim), serve it over https and set spec.workload.rdb.url, or load it with membench run",
                rdb.path
            ));
        }
    };
    if let Some(i) = benchmark
        .spec
        .engines
        .iter()
        .position(|e| e.memory.is_none())
    {
        return Err(format!(
            "spec.engines[{i}].memory is not set: with workload.rdb in a cluster the operator cannot read the file {place} to size the engine, so each engine needs its memory (about 1.5 times the file's data and 100 B a key; the client refuses a file that will not fit before writing anything, naming its estimate)"
        ));
    }
    Ok(())
}

/// Refuses the local-only fields, which a cluster would otherwise ignore without a word and
/// measure something else than the spec says: the engine fields that pick a program.
/// (`peak.replica` runs in both: a second process locally, a replica pod on a node of its own
/// in a cluster.)
fn refuse_local_only_fields(benchmark: &MemoryBenchmark) -> Result<(), String> {
    for (i, engine) in benchmark.spec.engines.iter().enumerate() {
        let set = [
            engine.binary.is_some(),
            engine.build.is_some(),
            engine.ld_preload.is_some(),
        ];
        if let Some(((field, why), _)) = LOCAL_ONLY_FIELDS.iter().zip(set).find(|(_, set)| *set) {
            return Err(format!(
                "spec.engines[{i}].{field} applies to membench run only ({why}); remove it from the MemoryBenchmark you create in the cluster"
            ));
        }
        if engine.allocator == Some(Allocator::Jemalloc) && engine.engine == EngineKind::Dragonfly {
            return Err(format!(
                "spec.engines[{i}].allocator: jemalloc does not apply to Dragonfly, which always uses its own allocator (mimalloc); remove it"
            ));
        }
    }
    Ok(())
}

/// `instanceType` or `instanceTypes`, each entry a label value, none twice, not both fields.
fn instance_types(spec: &crate::crd::MemoryBenchmarkSpec) -> Result<(), String> {
    if !spec.instance_type.is_empty() && !spec.instance_types.is_empty() {
        return Err(format!("spec: {}", message::BOTH_INSTANCE_TYPE_FIELDS));
    }
    if spec.instance_types.len() > 4 {
        return Err(format!(
            "spec.instanceTypes has {} entries: at most 4 instance types per benchmark",
            spec.instance_types.len()
        ));
    }
    for (i, instance_type) in spec.instance_types.iter().enumerate() {
        if instance_type.is_empty()
            || instance_type.len() > LABEL_VALUE_MAX
            || !is_label_value(instance_type)
        {
            return Err(format!(
                "spec.instanceTypes[{i}]: invalid value '{instance_type}': {}",
                message::INSTANCE_TYPES
            ));
        }
        if spec.instance_types[..i].contains(instance_type) {
            return Err(format!(
                "spec.instanceTypes[{i}] '{instance_type}': {}",
                message::INSTANCE_TYPES_DISTINCT
            ));
        }
    }
    Ok(())
}

/// The schema's limits and CEL rules, checked locally with the same wording. An instance type
/// is optional here (a local run does not use one; [`validate`] requires it), but must be a
/// label value when given.
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
    limit(
        "repetitions",
        spec.repetitions.into(),
        1,
        crate::crd::MAX_REPETITIONS.into(),
    )?;
    limit(
        "pipeline",
        spec.pipeline.into(),
        1,
        crate::crd::MAX_PIPELINE.into(),
    )?;
    limit("settleSeconds", spec.settle_seconds.into(), 0, 3600)?;
    let name = benchmark.metadata.name.as_deref().unwrap_or_default();
    if name.len() > MAX_BENCHMARK_NAME {
        return Err(format!(
            "metadata.name '{name}' has {} characters: {}",
            name.len(),
            message::NAME_LENGTH
        ));
    }
    let invalid = |field: String, value: &str, why: &str| {
        Err(format!("spec.{field}: invalid value '{value}': {why}"))
    };
    if !spec.instance_type.is_empty() && !is_label_value(&spec.instance_type) {
        return invalid(
            "instanceType".into(),
            &spec.instance_type,
            message::INSTANCE_TYPE,
        );
    }
    instance_types(spec)?;
    if spec.parallelism < 1 || spec.parallelism > 32 {
        return Err(format!(
            "spec.parallelism is {}: {} and at most 32",
            spec.parallelism,
            message::PARALLELISM
        ));
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, engine) in spec.engines.iter().enumerate() {
        if let Some(image) = &engine.image
            && !is_image_reference(image)
        {
            return invalid(format!("engines[{i}].image"), image, message::IMAGE);
        }
        if let Some(memory) = &engine.memory {
            if !is_memory_quantity(memory) {
                return invalid(
                    format!("engines[{i}].memory"),
                    memory,
                    message::MEMORY_QUANTITY,
                );
            }
            if parse_memory_quantity(memory).is_none_or(|bytes| bytes < 16 * MIB) {
                return invalid(
                    format!("engines[{i}].memory"),
                    memory,
                    message::MEMORY_MINIMUM,
                );
            }
            if engine.engine == EngineKind::Dragonfly {
                let threads = dragonfly_memory::threads(engine);
                let minimum = dragonfly_memory::minimum_limit(threads);
                if parse_memory_quantity(memory).is_some_and(|bytes| bytes < minimum) {
                    return Err(format!(
                        "spec.engines[{i}].memory is {memory}: Dragonfly needs {} MiB of maxmemory per thread to start, and its pod gives it {}% of the memory limit as maxmemory, so with {threads} threads the limit must be at least {}; raise memory, or run fewer threads (--proactor_threads)",
                        dragonfly_memory::MAXMEMORY_PER_THREAD / MIB,
                        dragonfly_memory::MAXMEMORY_PERCENT,
                        mebibytes(minimum)
                    ));
                }
            }
        }
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
        engine_config::check_config(i, engine, spec.eviction.is_some())?;
        if !names.insert(engine.display_name()) {
            return Err(format!(
                "spec.engines[{i}] is a second '{}': give entries with the same engine and version a different engines[].name",
                engine.display_name()
            ));
        }
    }
    if let Some(placement) = &spec.placement {
        validate_placement(placement)?;
    }
    if let Some(sizes) = &spec.pod_resources {
        for (field, value) in [
            ("engineCpu", &sizes.engine_cpu),
            ("clientCpu", &sizes.client_cpu),
        ] {
            if !is_cpu_quantity(value)
                || value
                    .trim_end_matches('m')
                    .trim_matches(['0', '.'])
                    .is_empty()
            {
                return invalid(
                    format!("podResources.{field}"),
                    value,
                    &format!("{}, more than 0", message::CPU_QUANTITY),
                );
            }
        }
        if !is_memory_quantity(&sizes.client_memory)
            || parse_memory_quantity(&sizes.client_memory).is_none_or(|b| b < 16 * MIB)
        {
            return invalid(
                "podResources.clientMemory".into(),
                &sizes.client_memory,
                &format!("{}, at least 16Mi", message::MEMORY_QUANTITY),
            );
        }
    }
    if let Some(sorted_set) = &spec.workload.sorted_set {
        let every = sorted_set.sample_every;
        if every != 0 && every < MIN_SAMPLE_EVERY {
            return invalid(
                "workload.sortedSet.sampleEvery".into(),
                &every.to_string(),
                message::SAMPLE_EVERY,
            );
        }
        if every != 0 && sorted_set.members / every > MAX_SAMPLES {
            return invalid(
                "workload.sortedSet.sampleEvery".into(),
                &every.to_string(),
                message::SAMPLES_PER_REPETITION,
            );
        }
    }
    let workload = Workload::from_spec(&spec.workload).map_err(|e| e.to_string())?;
    for (i, engine) in spec.engines.iter().enumerate() {
        shards::check_shards(i, engine, &workload)?;
    }
    let ttl = Ttl::from_spec(&spec.workload, spec.settle_seconds).map_err(|e| e.to_string())?;
    if ttl.is_none()
        && let Some(i) = spec.engines.iter().position(|e| e.without_ttl)
    {
        return Err(format!(
            "spec.engines[{i}].withoutTtl: the workload has no ttlSeconds, so every entry already loads it without a TTL; set the workload's ttlSeconds, or remove withoutTtl"
        ));
    }
    for (i, engine) in spec.engines.iter().enumerate() {
        let phases = SpecPhases::of_entry(spec, i).map_err(|e| e.to_string())?;
        phases
            .check_spec(spec, &workload, ttl.is_some())
            .map_err(|e| e.to_string())?;
        // The engine must reach maxmemory before its pod's limit, or the kernel kills it first.
        let (Some(eviction), Some(eviction_spec), Some(memory)) =
            (&phases.eviction, &spec.eviction, &engine.memory)
        else {
            continue;
        };
        if parse_memory_quantity(memory).is_some_and(|limit| limit <= eviction.maxmemory) {
            let given = match &eviction_spec.maxmemory {
                Some(written) => format!("spec.eviction.maxmemory ({written})"),
                None => format!(
                    "spec.engines[{i}].config.maxmemory ({})",
                    engine.config.get("maxmemory").map_or("", String::as_str)
                ),
            };
            return Err(format!(
                "{given} is not below spec.engines[{i}].memory ({memory}): the pod's limit would stop the engine before maxmemory does; lower maxmemory or raise memory"
            ));
        }
    }
    if let Workload::Profile(profile) = &workload {
        // A rebuild that cannot fit ends in an engine out of memory midway: refused first.
        let needs = profile.estimated_bytes();
        for (i, engine) in spec.engines.iter().enumerate() {
            let Some(memory) = &engine.memory else {
                continue;
            };
            if parse_memory_quantity(memory).is_some_and(|limit| limit < needs) {
                return Err(format!(
                    "spec.engines[{i}].memory is {memory}, but the profile's rebuild ({} keys, scale {}, elementScale {}) needs about {} of data: raise memory, or lower workload.profile.scale or elementScale",
                    profile.keys,
                    profile.scale,
                    profile.element_scale,
                    mebibytes(needs)
                ));
            }
        }
    }
    if let Some(table) = spec.published_table {
        table.table().check_workload(&workload)?;
    }
    Ok(())
}

/// The placement rules of the CRD: label keys and values, tolerations the pod API accepts.
fn validate_placement(placement: &PlacementSpec) -> Result<(), String> {
    check_placement(placement, "spec.placement")
}

/// [`validate_placement`] for placement given elsewhere (the operator's defaults for every
/// benchmark pod), its messages naming `origin` (`spec.placement`, or the flag and chart value).
pub fn check_placement(placement: &PlacementSpec, origin: &str) -> Result<(), String> {
    let invalid = |field: String, value: &str, why: &str| {
        Err(format!("{origin}.{field}: invalid value '{value}': {why}"))
    };
    if placement.node_selector.len() > MAX_NODE_SELECTOR {
        return Err(format!(
            "{origin}.nodeSelector has {} labels: at most {MAX_NODE_SELECTOR}",
            placement.node_selector.len()
        ));
    }
    for (key, value) in &placement.node_selector {
        if !is_label_key(key) {
            return invalid("nodeSelector".into(), key, message::NODE_SELECTOR_KEY);
        }
        if !is_label_value(value) {
            return invalid(
                format!("nodeSelector.{key}"),
                value,
                message::NODE_SELECTOR_VALUE,
            );
        }
    }
    if placement.tolerations.len() > MAX_TOLERATIONS {
        return Err(format!(
            "{origin}.tolerations has {} entries: at most {MAX_TOLERATIONS}",
            placement.tolerations.len()
        ));
    }
    for (i, toleration) in placement.tolerations.iter().enumerate() {
        let key = toleration.key.as_deref().unwrap_or_default();
        let value = toleration.value.as_deref().unwrap_or_default();
        let operator = toleration.operator.as_deref().unwrap_or("Equal");
        let effect = toleration.effect.as_deref().unwrap_or_default();
        if !key.is_empty() && !is_label_key(key) {
            return invalid(
                format!("tolerations[{i}].key"),
                key,
                message::TOLERATION_KEY,
            );
        }
        if !is_label_value(value) {
            return invalid(
                format!("tolerations[{i}].value"),
                value,
                message::TOLERATION_VALUE,
            );
        }
        if !["Equal", "Exists"].contains(&operator) {
            return invalid(
                format!("tolerations[{i}].operator"),
                operator,
                "supported values: Equal, Exists",
            );
        }
        if !["", "NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
            return invalid(
                format!("tolerations[{i}].effect"),
                effect,
                "supported values: NoSchedule, PreferNoSchedule, NoExecute (or empty for all)",
            );
        }
        if key.is_empty() && operator != "Exists" {
            return invalid(
                format!("tolerations[{i}].operator"),
                operator,
                message::TOLERATION_EMPTY_KEY,
            );
        }
        if operator == "Exists" && !value.is_empty() {
            return invalid(
                format!("tolerations[{i}].value"),
                value,
                message::TOLERATION_EXISTS_VALUE,
            );
        }
        if toleration.toleration_seconds.is_some() && effect != "NoExecute" {
            return invalid(
                format!("tolerations[{i}].effect"),
                effect,
                message::TOLERATION_SECONDS,
            );
        }
    }
    Ok(())
}

/// The TTL an entry loads its workload with: the workload's, unless the entry is `withoutTtl`.
/// The spec was validated ([`validate_spec`]).
pub fn entry_ttl(
    spec: &crate::crd::MemoryBenchmarkSpec,
    engine: &crate::crd::EngineSpec,
) -> Option<Ttl> {
    if engine.without_ttl {
        return None;
    }
    Ttl::from_spec(&spec.workload, spec.settle_seconds)
        .ok()
        .flatten()
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

/// The pod memory of one of `shards` shards: [`estimated_engine_memory`]'s fixed part, and
/// its share of the data, rounded up to a mebibyte.
pub fn estimated_shard_memory(workload: &Workload, engine: EngineKind, shards: u32) -> u64 {
    let whole = estimated_engine_memory(workload, engine);
    let base = engine_memory_base(engine);
    let share = whole
        .saturating_sub(base)
        .div_ceil(u64::from(shards.max(1)));
    (base + share).div_ceil(MIB) * MIB
}

fn engine_memory_base(engine: EngineKind) -> u64 {
    match engine {
        EngineKind::Dragonfly => 1024 * MIB,
        _ => 256 * MIB,
    }
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
        Workload::Profile(profile) => profile.estimated_bytes(),
        Workload::Rdb(load) => load.estimated_bytes(),
    };
    let bytes = engine_memory_base(engine).saturating_add(data.saturating_mul(3) / 2);
    bytes.div_ceil(MIB) * MIB
}

#[cfg(test)]
mod tests;
