//! The formats Kubernetes and container runtimes give label values, label keys, image references
//! and memory quantities, as regular expressions. The CRD's CEL rules use them (so the API server
//! rejects a bad spec at admission instead of the pod API rejecting its pod later), and the spec
//! validation of local runs uses the very same expressions.
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

fn compiled(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the pattern compiles")
}

static LABEL_VALUE_RE: LazyLock<Regex> = LazyLock::new(|| compiled(LABEL_VALUE));
static LABEL_KEY_RE: LazyLock<Regex> = LazyLock::new(|| compiled(LABEL_KEY));
static IMAGE_REFERENCE_RE: LazyLock<Regex> = LazyLock::new(|| compiled(IMAGE_REFERENCE));
static MEMORY_QUANTITY_RE: LazyLock<Regex> = LazyLock::new(|| compiled(MEMORY_QUANTITY));

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
