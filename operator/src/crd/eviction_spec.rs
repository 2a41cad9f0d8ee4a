//! `spec.eviction`: a load past maxmemory after a repetition's other phases. The phase itself
//! is `crate::client::phases::eviction`; only the fields, and an entry's own limit read in
//! their place, are here.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::engine_spec::EngineSpec;

/// A load past `maxmemory`, after the repetition's other phases: the engine is emptied, given
/// `maxmemory` and `policy`, and loaded with the workload's items (key numbers counted on past
/// the workload's) until `loadTo` times `maxmemory` of them were written, its used_memory read
/// every 1,000 writes. What it measures: the peak used_memory (above maxmemory: the
/// overshoot, a hash table's grow among it), RSS at the end, the keys evicted and kept, and the
/// write rate once eviction runs. With `noeviction` the engine refuses writes at maxmemory:
/// those refusals are its result, not a failure. Dragonfly takes `maxmemory` at runtime but
/// evicts only with `cache_mode: "true"` in the entry's `config` (otherwise it refuses, as
/// `noeviction`), and has no `maxmemory-policy`. An entry may give its own limit and policy in
/// its `config` (`maxmemory`, `maxmemory-policy`) in place of these: its engine then starts
/// without them, and this phase gives them to it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvictionSpec {
    /// The memory limit, as the engine writes it: `100mb`, `2gb`, `104857600` (k, kb, m, mb, g,
    /// gb; kb and the like are powers of 1024, k and the like of 1000). Needed unless every
    /// entry sets `config.maxmemory`; refused beside an entry's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 24))]
    pub maxmemory: Option<String>,
    /// `maxmemory-policy`: noeviction, allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru,
    /// volatile-lfu, volatile-random or volatile-ttl (default: the entry's
    /// `config.maxmemory-policy`, else allkeys-lru).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// How much to write, as a multiple of maxmemory (estimated from the repetition's own bytes
    /// per item): above 1, at most 20.
    #[serde(default = "default_load_to")]
    pub load_to: f64,
}

/// The policy of a load past maxmemory that neither `spec.eviction` nor the entry names.
pub const DEFAULT_EVICTION_POLICY: &str = "allkeys-lru";

pub fn default_load_to() -> f64 {
    3.0
}

impl EvictionSpec {
    /// The load past maxmemory `engine` runs: this one's maxmemory and policy, or the entry's own
    /// `config.maxmemory` and `config.maxmemory-policy`, with both fields set. Refused when
    /// neither names a maxmemory, or both do (or name two policies): the message names the
    /// entry's fields from `config.`.
    pub fn for_entry(&self, engine: &EngineSpec) -> Result<EvictionSpec, String> {
        let own = |name: &str| {
            engine
                .config
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let maxmemory = match (self.maxmemory.clone(), own("maxmemory")) {
            (Some(spec), Some(entry)) => {
                return Err(format!(
                    "config.maxmemory ({entry}) and spec.eviction.maxmemory ({spec}) are both set: keep one (config.maxmemory is this engine's own limit for the load past it)"
                ));
            }
            (None, None) => {
                return Err(
                    "has no maxmemory for spec.eviction's load past it: set spec.eviction.maxmemory, or config.maxmemory on this engine".into(),
                );
            }
            (Some(limit), None) | (None, Some(limit)) => limit,
        };
        let policy = match (self.policy.clone(), own("maxmemory-policy")) {
            (Some(spec), Some(entry)) if !spec.eq_ignore_ascii_case(&entry) => {
                return Err(format!(
                    "config.maxmemory-policy ({entry}) and spec.eviction.policy ({spec}) differ: keep one"
                ));
            }
            (Some(policy), _) | (None, Some(policy)) => policy,
            (None, None) => DEFAULT_EVICTION_POLICY.to_string(),
        };
        Ok(EvictionSpec {
            maxmemory: Some(maxmemory),
            policy: Some(policy),
            load_to: self.load_to,
        })
    }
}
