//! Whether a benchmark's pods fit a node of its instance type: each engine pod (its CPU,
//! `podResources.engineCpu`, and its memory, `engines[].memory` or the estimate) and the client
//! pod beside it (`podResources.clientCpu`, `clientMemory`) against what such a node gives pods.
//! A node of the type in the cluster says that itself (`status.allocatable`); without one the
//! embedded instance-type table does, less what an EKS node keeps for itself
//! ([`crate::capacity::instance_types`]: kube-reserved memory and CPU, and the eviction
//! threshold). A spec that cannot fit is `DoesNotFit` before any pod exists, rather than pods
//! Pending until the scheduling deadline. Pure: [`super::plan`] calls it with the nodes that
//! the reconciliation read.

use super::spec_error::SpecError;
use crate::capacity::instance_types;
use crate::crd::{MemoryBenchmark, PodResourcesSpec};
use crate::validation::parse_memory_quantity;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// What one node of an instance type gives pods, as its status says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAllocatable {
    /// The node's name.
    pub node: String,
    /// Its `node.kubernetes.io/instance-type` label.
    pub instance_type: String,
    pub cpu_millis: u64,
    pub memory_bytes: u64,
}

/// Millicores of a Kubernetes CPU quantity (`2`, `1.5`, `500m`), or `None` when it is not one.
pub fn parse_cpu_quantity(quantity: &str) -> Option<u64> {
    let quantity = quantity.trim();
    if let Some(millis) = quantity.strip_suffix('m') {
        return millis.parse().ok();
    }
    let (whole, fraction) = quantity.split_once('.').unwrap_or((quantity, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let fraction: u64 = format!("{fraction:0<3}").parse().ok()?;
    whole.checked_mul(1000)?.checked_add(fraction)
}

/// CPU an EKS node keeps for the kubelet (kube-reserved), as the EKS AMI's bootstrap computes
/// it from the vCPUs (`get_cpu_millicores_to_reserve`): 6% of the first core, 1% of the
/// second, 0.5% of the third and fourth, 0.25% of every core above four.
pub fn eks_reserved_cpu_millis(vcpus: u32) -> u64 {
    let total = u64::from(vcpus) * 1000;
    let ranges = [
        (0, 1000, 600),
        (1000, 2000, 100),
        (2000, 4000, 50),
        (4000, total, 25),
    ];
    ranges
        .iter()
        .filter(|(start, _, _)| total > *start)
        .map(|&(start, end, hundredths)| (total.min(end) - start) * hundredths / 10_000)
        .sum()
}

/// Where the figures of a node of the type came from, for the message.
enum Source<'a> {
    Node(&'a NodeAllocatable),
    Table(&'static instance_types::InstanceType),
}

/// Checks every run's pods against its instance type; the error names what the pods need,
/// what the node gives and where that figure comes from. `engine_memory` is each entry's pod
/// memory ([`crate::validation::ValidSpec`]), `sizes` the pods' CPU and the client's memory.
/// An instance type that neither a node nor the table knows is not checked.
pub fn check(
    benchmark: &MemoryBenchmark,
    engine_memory: &[u64],
    sizes: &PodResourcesSpec,
    nodes: &[NodeAllocatable],
) -> Result<(), SpecError> {
    let spec = &benchmark.spec;
    let unreadable = |field: &str, value: &str| {
        SpecError::Invalid(format!(
            "spec.podResources.{field}: invalid value '{value}': not a quantity"
        ))
    };
    let engine_cpu = parse_cpu_quantity(&sizes.engine_cpu)
        .ok_or_else(|| unreadable("engineCpu", &sizes.engine_cpu))?;
    let client_cpu = parse_cpu_quantity(&sizes.client_cpu)
        .ok_or_else(|| unreadable("clientCpu", &sizes.client_cpu))?;
    let client_memory = parse_memory_quantity(&sizes.client_memory)
        .ok_or_else(|| unreadable("clientMemory", &sizes.client_memory))?;
    for instance_type in spec.instance_types() {
        // The roomiest node of the type: the scheduler may pick any.
        let node = nodes
            .iter()
            .filter(|n| n.instance_type == instance_type)
            .max_by_key(|n| (n.memory_bytes, n.cpu_millis));
        let (source, cpu, memory) = match node {
            Some(node) => (Source::Node(node), node.cpu_millis, node.memory_bytes),
            None => match instance_types::lookup(&instance_type) {
                Ok(t) => (
                    Source::Table(t),
                    (u64::from(t.vcpus) * 1000).saturating_sub(eks_reserved_cpu_millis(t.vcpus)),
                    t.memory_bytes().saturating_sub(t.node_reserve_bytes()),
                ),
                Err(_) => continue,
            },
        };
        for (i, engine) in spec.engines.iter().enumerate() {
            let engine_bytes = engine_memory.get(i).copied().unwrap_or(0);
            let need_cpu = engine_cpu + client_cpu;
            let need_memory = engine_bytes.saturating_add(client_memory);
            if need_cpu <= cpu && need_memory <= memory {
                continue;
            }
            let memory_from = match &engine.memory {
                Some(m) => format!("spec.engines[{i}].memory {m}"),
                None => format!(
                    "{} estimated from the workload (set spec.engines[{i}].memory to size it)",
                    size(engine_bytes)
                ),
            };
            let gives = match source {
                Source::Node(node) => format!(
                    "node {} of instance type {instance_type} gives pods {} CPU and {} (its status.allocatable)",
                    node.node,
                    cores(cpu),
                    size(memory)
                ),
                Source::Table(t) => format!(
                    "a node of instance type {instance_type} gives pods {} CPU and {} (the instance-type table's {} vCPUs and {} GiB, less EKS's reserve of {} CPU and {}; no node of the type is in the cluster yet)",
                    cores(cpu),
                    size(memory),
                    t.vcpus,
                    t.memory_gib,
                    cores(eks_reserved_cpu_millis(t.vcpus)),
                    size(t.node_reserve_bytes())
                ),
            };
            return Err(SpecError::DoesNotFit {
                field: format!(
                    "spec.podResources and spec.engines[{i}] ({})",
                    engine.display_name()
                ),
                message: format!(
                    "the engine pod ({} CPU, memory {memory_from}) and the client pod beside it ({} CPU, {}) need {} CPU and {} on one node, but {gives}; lower spec.podResources or the engine's memory, or choose a larger instance type",
                    cores(engine_cpu),
                    cores(client_cpu),
                    size(client_memory),
                    cores(need_cpu),
                    size(need_memory),
                ),
            });
        }
    }
    Ok(())
}

/// Millicores as cores: `2`, `1.5`, `15.89`.
fn cores(millis: u64) -> String {
    let text = format!("{}.{:03}", millis / 1000, millis % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Bytes in GiB (two decimals) from 1 GiB, else in MiB.
fn size(bytes: u64) -> String {
    if bytes >= GIB {
        format!("{:.2} GiB", bytes as f64 / GIB as f64)
    } else {
        format!("{} MiB", bytes.div_ceil(MIB))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::spec_file::parse_specs;

    fn benchmark_from_yaml(spec: &str) -> MemoryBenchmark {
        let indented = spec.replace('\n', "\n  ");
        parse_specs(&format!(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: fit}}\nspec:\n  {indented}\n"
        ))
        .unwrap()
        .remove(0)
    }

    fn sizes(engine_cpu: &str, client_cpu: &str, client_memory: &str) -> PodResourcesSpec {
        PodResourcesSpec {
            engine_cpu: engine_cpu.into(),
            client_cpu: client_cpu.into(),
            client_memory: client_memory.into(),
        }
    }

    #[test]
    fn cpu_quantities_are_read_in_millicores() {
        assert_eq!(parse_cpu_quantity("2"), Some(2000));
        assert_eq!(parse_cpu_quantity("1.5"), Some(1500));
        assert_eq!(parse_cpu_quantity("0.25"), Some(250));
        assert_eq!(parse_cpu_quantity("500m"), Some(500));
        assert_eq!(parse_cpu_quantity("15890m"), Some(15890));
        assert_eq!(parse_cpu_quantity("two"), None);
        assert_eq!(parse_cpu_quantity("1.2345"), None);
        assert_eq!(cores(15890), "15.89");
        assert_eq!(cores(2000), "2");
    }

    #[test]
    fn eks_reserves_cpu_as_its_ami_computes_it() {
        // 60 + 10 + 10 + 12 cores * 2.5 = 110m on 16 vCPUs; 70m on 2.
        assert_eq!(eks_reserved_cpu_millis(16), 110);
        assert_eq!(eks_reserved_cpu_millis(2), 70);
        assert_eq!(eks_reserved_cpu_millis(4), 80);
        assert_eq!(eks_reserved_cpu_millis(64), 230);
    }

    #[test]
    fn pods_larger_than_the_tables_allocatable_are_refused_naming_both_figures() {
        let b = benchmark_from_yaml(
            "instanceType: r8g.large\nengines: [{engine: redis, version: \"8.2.3\", memory: 15Gi}]\nworkload: {strings: {keys: 1000}}",
        );
        // r8g.large: 16 GiB less 11*29+255+100 = 674 MiB leaves 15.34 GiB; 15 GiB + 256 Mi fits.
        assert_eq!(
            check(&b, &[15 * GIB], &sizes("1", "500m", "256Mi"), &[]),
            Ok(())
        );
        // 2 vCPUs less 70m: an engine of 2 CPUs and a client of 1 cannot fit.
        let err = check(&b, &[15 * GIB], &sizes("2", "1", "256Mi"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("need 3 CPU and 15.25 GiB")
                && err.contains("gives pods 1.93 CPU and 15.34 GiB")
                && err.contains("the instance-type table's 2 vCPUs and 16 GiB")
                && err.contains("spec.engines[0].memory 15Gi")
                && err.contains("spec.podResources"),
            "{err}"
        );
        // Memory alone: 15.5 GiB + 256 Mi is more than 15.34 GiB.
        let err = check(&b, &[15 * GIB + GIB / 2], &sizes("1", "500m", "256Mi"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("15.75 GiB on one node"), "{err}");
    }

    #[test]
    fn a_node_of_the_type_in_the_cluster_says_what_it_gives() {
        let b = benchmark_from_yaml(
            "instanceType: r8g.4xlarge\nengines: [{engine: valkey, version: \"9.1.2\", memory: 8Gi}]\nworkload: {strings: {keys: 1000}}",
        );
        let small = NodeAllocatable {
            node: "ip-10-0-0-1".into(),
            instance_type: "r8g.4xlarge".into(),
            cpu_millis: 2500,
            memory_bytes: 4 * GIB,
        };
        // The table would take it (124 GiB); the node that is there cannot.
        assert_eq!(
            check(&b, &[8 * GIB], &sizes("2", "1", "256Mi"), &[]),
            Ok(())
        );
        let err = check(
            &b,
            &[8 * GIB],
            &sizes("2", "1", "256Mi"),
            std::slice::from_ref(&small),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("node ip-10-0-0-1 of instance type r8g.4xlarge gives pods 2.5 CPU and 4.00 GiB (its status.allocatable)")
                && err.contains("need 3 CPU and 8.25 GiB"),
            "{err}"
        );
        // An unknown type without a node is not checked.
        let unknown = benchmark_from_yaml(
            "instanceType: kind\nengines: [{engine: valkey, version: \"9.1.2\", memory: 800Gi}]\nworkload: {strings: {keys: 1000}}",
        );
        assert_eq!(
            check(&unknown, &[800 * GIB], &sizes("2", "1", "256Mi"), &[]),
            Ok(())
        );
    }
}
