//! The formats Kubernetes and container runtimes give label values, label keys, image references
//! and memory quantities, as regular expressions. The CRD's CEL rules use them (so the API server
//! rejects a bad spec at admission instead of the pod API rejecting its pod later), and the spec
//! validation of local runs uses the very same expressions, and the same words when a field does
//! not match ([`message`]). A leaf: the CRD and the validation both read it, it reads neither.
//!
//! They are written without backslashes (`[.]` rather than an escaped dot), so each one is valid
//! as it stands inside a CEL string literal, in Go's RE2 and in the `regex` crate alike.

use std::sync::LazyLock;

use regex::Regex;

/// A label value: at most 63 characters (checked apart), empty, or alphanumerics with `-`, `_`
/// and `.` inside (`r8g.4xlarge`).
pub const LABEL_VALUE: &str = "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
pub const LABEL_VALUE_MAX: usize = 63;

/// A label key (a qualified name): an optional DNS subdomain prefix and `/`, then a name of at
/// most 63 characters (`node.kubernetes.io/instance-type`, `pool`).
pub const LABEL_KEY: &str = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";
/// A 253-character prefix, the `/` and a 63-character name.
pub const LABEL_KEY_MAX: usize = 317;

/// An image reference as container runtimes parse it: an optional registry host (and port),
/// a lowercase repository path, an optional tag and an optional digest
/// (`valkey/valkey:9.1.2`, `registry.example.com:5000/team/redis:7.4@sha256:<hex>`).
pub const IMAGE_REFERENCE: &str = "^(([a-zA-Z0-9]|[a-zA-Z0-9][-a-zA-Z0-9]*[a-zA-Z0-9])([.]([a-zA-Z0-9]|[a-zA-Z0-9][-a-zA-Z0-9]*[a-zA-Z0-9]))*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*)*(:[A-Za-z0-9_][-A-Za-z0-9_.]{0,127})?(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$";
pub const IMAGE_REFERENCE_MAX: usize = 512;

/// A memory quantity in the units membench reads: bytes, `k`/`M`/`G`/`T`, `Ki`/`Mi`/`Gi`/`Ti`,
/// or a decimal exponent (`512Mi`, `16Gi`, `2G`, `1.5Gi`, `1e9`).
pub const MEMORY_QUANTITY: &str = "^[0-9]+([.][0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T|[eE][0-9]+)?$";
pub const MEMORY_QUANTITY_MAX: usize = 32;
/// A CPU quantity: whole or decimal cores (`2`, `1.5`) or millicores (`500m`).
pub const CPU_QUANTITY: &str = "^([0-9]+m|[0-9]+([.][0-9]{1,3})?)$";
pub const CPU_QUANTITY_MAX: usize = 16;

/// The smallest engine memory: no engine starts with less.
pub const MIN_ENGINE_MEMORY: &str = "16Mi";

/// Bounds of the sorted set's growth curve: readings at least this many members apart (a
/// reading every few members would slow the load it measures), and at most this many readings
/// per repetition.
pub const MIN_SAMPLE_EVERY: u64 = 1000;
pub const MAX_SAMPLES: u64 = 100_000;

/// Most extra node labels and tolerations a spec may carry (keeps the API server's CEL cost
/// estimate of the rules over them bounded).
pub const MAX_NODE_SELECTOR: usize = 16;
pub const MAX_TOLERATIONS: usize = 16;

/// Benchmark names are at most this long: pod names add up to 15 characters (`-12-client-3`)
/// and must stay within 63, and the name is a label value on every pod.
pub const MAX_BENCHMARK_NAME: usize = 48;

/// A sharded cluster (`engines[].shards`) has at least 2 shards and at most this many, each on
/// a node of its own: more shards than that are more nodes than a memory comparison needs.
pub const MIN_SHARDS: u32 = 2;
pub const MAX_SHARDS: u32 = 16;

fn compiled(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the pattern compiles")
}

static LABEL_VALUE_RE: LazyLock<Regex> = LazyLock::new(|| compiled(LABEL_VALUE));
static LABEL_KEY_RE: LazyLock<Regex> = LazyLock::new(|| compiled(LABEL_KEY));
static IMAGE_REFERENCE_RE: LazyLock<Regex> = LazyLock::new(|| compiled(IMAGE_REFERENCE));
static MEMORY_QUANTITY_RE: LazyLock<Regex> = LazyLock::new(|| compiled(MEMORY_QUANTITY));
static CPU_QUANTITY_RE: LazyLock<Regex> = LazyLock::new(|| compiled(CPU_QUANTITY));

pub fn is_label_value(value: &str) -> bool {
    value.len() <= LABEL_VALUE_MAX && LABEL_VALUE_RE.is_match(value)
}

pub fn is_label_key(key: &str) -> bool {
    key.len() <= LABEL_KEY_MAX && LABEL_KEY_RE.is_match(key)
}

pub fn is_image_reference(image: &str) -> bool {
    image.len() <= IMAGE_REFERENCE_MAX && IMAGE_REFERENCE_RE.is_match(image)
}

pub fn is_memory_quantity(quantity: &str) -> bool {
    quantity.len() <= MEMORY_QUANTITY_MAX && MEMORY_QUANTITY_RE.is_match(quantity)
}

pub fn is_cpu_quantity(quantity: &str) -> bool {
    quantity.len() <= CPU_QUANTITY_MAX && CPU_QUANTITY_RE.is_match(quantity)
}

/// The words of the CRD's CEL rules, shared with [`crate::validation::validate_spec`] so that
/// a local run says what the API server would.
pub mod message {
    pub const NAME_LENGTH: &str = "metadata.name may have at most 48 characters: the operator names the benchmark's pods after it (adding up to 15 characters, such as -12-client-3) and labels them with it; choose a shorter name";
    pub const INSTANCE_TYPES: &str = "every instanceTypes entry must be a node label value, such as r8g.4xlarge: letters, digits, '-', '_' and '.', starting and ending with a letter or digit";
    pub const INSTANCE_TYPES_DISTINCT: &str =
        "instanceTypes lists an instance type twice: name each one once";
    pub const BOTH_INSTANCE_TYPE_FIELDS: &str = "set instanceType (one instance type) or instanceTypes (several), not both: move instanceType into the instanceTypes list";
    pub const NO_INSTANCE_TYPE: &str = "instanceType is missing: a cluster runs the engines on a node of this instance type (or set instanceTypes to run them on several)";
    pub const PARALLELISM: &str = "parallelism must be at least 1 (engines at once on each instance type; 1 runs them one after another)";
    pub const INSTANCE_TYPE: &str = "instanceType must be a node label value, such as r8g.4xlarge: letters, digits, '-', '_' and '.', starting and ending with a letter or digit";
    pub const IMAGE: &str = "image must be an image reference such as valkey/valkey:9.1.2 or registry.example.com/team/redis:7.4@sha256:<digest>: an optional registry host, a lowercase repository path, then an optional :tag and @digest, without spaces or a scheme";
    pub const MEMORY_QUANTITY: &str = "memory must be a memory quantity such as 512Mi, 16Gi, 2G or 1.5Gi (bytes, k, M, G, T, Ki, Mi, Gi or Ti)";
    pub const CPU_QUANTITY: &str =
        "CPU must be a CPU quantity such as 2, 1.5 or 500m (cores, or millicores with m)";
    pub const CPU_POSITIVE: &str = "CPU must be more than 0";
    pub const CLIENT_MEMORY_MINIMUM: &str = "clientMemory must be at least 16Mi";
    pub const MEMORY_MINIMUM: &str = "memory must be at least 16Mi: no engine starts with less";
    pub const SAMPLES_PER_REPETITION: &str = "sampleEvery is too small for members: a growth curve gets at most 100000 readings per repetition; raise sampleEvery to at least members / 100000, or set it to 0 for no curve";
    pub const SAMPLE_EVERY: &str = "sampleEvery must be 0 (no growth curve) or at least 1000: a reading every few members would slow down the load it measures";
    pub const NODE_SELECTOR_KEY: &str = "nodeSelector keys must be label keys such as pool or karpenter.sh/nodepool: an optional lowercase DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";
    pub const NODE_SELECTOR_VALUE: &str = "nodeSelector values must be label values: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (or empty)";
    pub const TOLERATION_EMPTY_KEY: &str =
        "a toleration without a key must have operator Exists (it then tolerates every taint)";
    pub const TOLERATION_EXISTS_VALUE: &str =
        "a toleration with operator Exists must not have a value";
    pub const TOLERATION_SECONDS: &str = "tolerationSeconds needs effect NoExecute (it is how long a pod stays on a node after a NoExecute taint appears)";
    pub const TOLERATION_KEY: &str =
        "a toleration key must be a label key such as dedicated or example.com/benchmarks";
    pub const SHARDS_RANGE: &str = "shards must be between 2 and 16: a sharded cluster has at least 2 shards, each an engine alone on its own node; for a one-node cluster leave shards out and set clusterMode: true";
    pub const SHARDS_WITHOUT_CLUSTER_MODE: &str = "shards runs a cluster, so clusterMode: false contradicts it: remove clusterMode (shards implies cluster mode) or remove shards";
    pub const SHARDS_DRAGONFLY: &str = "shards needs redis or valkey: Dragonfly has no multi-node cluster membench can join (its cluster mode is emulated on one node); remove shards, or set clusterMode: true for Dragonfly's emulated cluster";
    pub const SHARDS_SORTED_SET: &str = "engines[].shards cannot measure the sortedSet workload: a sorted set is one key, so all of it lands on one shard; use strings, records, randomStrings or a profile with shards, or remove shards";
    pub const TTL_SHARE_WITHOUT_SECONDS: &str =
        "ttlShare applies only with ttlSeconds: set ttlSeconds too, or remove ttlShare";
    pub const TOLERATION_VALUE: &str = "a toleration value must be a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_what_node_labels_carry() {
        for good in ["r8g.4xlarge", "m7i-flex.large", "a", "A_b", ""] {
            assert!(is_label_value(good), "{good}");
        }
        for bad in [
            "r8g 4xlarge",
            "-r8g",
            "r8g.",
            "r8g/4xlarge",
            &"a".repeat(64),
        ] {
            assert!(!is_label_value(bad), "{bad}");
        }
    }

    #[test]
    fn label_keys_may_have_a_dns_prefix() {
        for good in [
            "pool",
            "node.kubernetes.io/instance-type",
            "karpenter.sh/nodepool",
            "Team_A",
        ] {
            assert!(is_label_key(good), "{good}");
        }
        for bad in [
            "",
            "/pool",
            "Example.com/pool",
            "pool/",
            "a/b/c",
            "bad key",
            &"a".repeat(64),
        ] {
            assert!(!is_label_key(bad), "{bad}");
        }
    }

    #[test]
    fn image_references_follow_the_runtime_grammar() {
        for good in [
            "redis:7.0.15",
            "valkey/valkey:9.1.2-alpine",
            "docker.dragonflydb.io/dragonflydb/dragonfly:v1.40.0",
            "localhost:5000/redis",
            "registry.example.com/team/redis:7.4@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "ghcr.io/membench/membench",
        ] {
            assert!(is_image_reference(good), "{good}");
        }
        for bad in [
            "",
            "redis 7",
            "team/Redis:7",
            "redis:",
            "redis:-7",
            "redis@sha256:short",
            "https://registry/redis",
            " redis",
        ] {
            assert!(!is_image_reference(bad), "{bad}");
        }
    }

    #[test]
    fn memory_quantities_in_the_units_membench_reads() {
        for good in ["512Mi", "16Gi", "2G", "1.5Gi", "1e9", "1000000"] {
            assert!(is_memory_quantity(good), "{good}");
        }
        for bad in ["", "lots", "12Qi", "1.5.Gi", "-1Gi", "500m", "1 Gi"] {
            assert!(!is_memory_quantity(bad), "{bad}");
        }
    }
}
