//! The engine settings a spec may change (`engines[].config`, and in a cluster `engines[].args`):
//! those that change how the engine lays data out in memory, or when it frees or compacts it,
//! and nothing else. Nothing here opens the engine, moves or writes its files, or loads code.
//! The CRD's rule on `config` is built from these tables, and `validation::engine_config`
//! checks values and parses args with them.

/// What a setting's value must look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A whole number, 0 or more.
    Count,
    /// A whole number that may be negative (`list-max-listpack-size -2`: 8 KiB per node).
    SignedCount,
    /// Bytes, with an optional unit: `1024`, `64mb`, `8gb`.
    Bytes,
    /// `yes` or `no` (Redis and Valkey).
    YesNo,
    /// `true` or `false` (Dragonfly's flags).
    TrueFalse,
    /// A whole number from 0 to 100.
    Percent,
    /// A decimal from 0 to 1 (`0.8`).
    Ratio,
    /// One of the listed words.
    OneOf(&'static [&'static str]),
}

impl ValueKind {
    /// The values it takes, in words, for an error message.
    pub fn describe(self) -> String {
        match self {
            ValueKind::Count => "a whole number, 0 or more".into(),
            ValueKind::SignedCount => "a whole number (negative ones allowed)".into(),
            ValueKind::Bytes => "bytes, optionally with a unit (1024, 64mb, 8gb)".into(),
            ValueKind::YesNo => "yes or no".into(),
            ValueKind::TrueFalse => "true or false".into(),
            ValueKind::Percent => "a whole number from 0 to 100".into(),
            ValueKind::Ratio => "a decimal from 0 to 1, such as 0.8".into(),
            ValueKind::OneOf(words) => format!("one of {}", words.join(", ")),
        }
    }
}

/// A setting a spec may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    /// Its name as the engine spells it (Redis and Valkey: `hash-max-listpack-entries`;
    /// Dragonfly: `list_max_listpack_size`).
    pub name: &'static str,
    pub kind: ValueKind,
}

const fn setting(name: &'static str, kind: ValueKind) -> Setting {
    Setting { name, kind }
}

const MAXMEMORY_POLICIES: &[&str] = &[
    "noeviction",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
];

/// Redis and Valkey: encoding thresholds (the listpack names and, for Redis 6.2 and older,
/// their ziplist aliases), active defragmentation, incremental rehashing and the server's
/// timer frequency that paces it, lazy freeing, and eviction once `maxmemory` is reached.
pub const REDIS_SETTINGS: &[Setting] = &[
    setting("hash-max-listpack-entries", ValueKind::Count),
    setting("hash-max-listpack-value", ValueKind::Count),
    setting("hash-max-ziplist-entries", ValueKind::Count),
    setting("hash-max-ziplist-value", ValueKind::Count),
    setting("set-max-intset-entries", ValueKind::Count),
    setting("set-max-listpack-entries", ValueKind::Count),
    setting("set-max-listpack-value", ValueKind::Count),
    setting("zset-max-listpack-entries", ValueKind::Count),
    setting("zset-max-listpack-value", ValueKind::Count),
    setting("zset-max-ziplist-entries", ValueKind::Count),
    setting("zset-max-ziplist-value", ValueKind::Count),
    setting("list-max-listpack-size", ValueKind::SignedCount),
    setting("list-max-ziplist-size", ValueKind::SignedCount),
    setting("list-compress-depth", ValueKind::Count),
    setting("stream-node-max-bytes", ValueKind::Bytes),
    setting("stream-node-max-entries", ValueKind::Count),
    setting("hll-sparse-max-bytes", ValueKind::Bytes),
    setting("activedefrag", ValueKind::YesNo),
    setting("active-defrag-ignore-bytes", ValueKind::Bytes),
    setting("active-defrag-threshold-lower", ValueKind::Percent),
    setting("active-defrag-threshold-upper", ValueKind::Percent),
    setting("active-defrag-cycle-min", ValueKind::Percent),
    setting("active-defrag-cycle-max", ValueKind::Percent),
    setting("active-defrag-max-scan-fields", ValueKind::Count),
    setting("activerehashing", ValueKind::YesNo),
    setting("hz", ValueKind::Count),
    setting("lazyfree-lazy-eviction", ValueKind::YesNo),
    setting("lazyfree-lazy-expire", ValueKind::YesNo),
    setting("lazyfree-lazy-server-del", ValueKind::YesNo),
    setting("lazyfree-lazy-user-del", ValueKind::YesNo),
    setting("lazyfree-lazy-user-flush", ValueKind::YesNo),
    setting("maxmemory", ValueKind::Bytes),
    setting("maxmemory-policy", ValueKind::OneOf(MAXMEMORY_POLICIES)),
    setting("maxmemory-samples", ValueKind::Count),
];

/// Dragonfly's flags: its list and hash encoding thresholds, defragmentation, and eviction
/// (`cache_mode` is its eviction policy: Dragonfly has no `maxmemory-policy`).
pub const DRAGONFLY_SETTINGS: &[Setting] = &[
    setting("list_max_listpack_size", ValueKind::SignedCount),
    setting("list_compress_depth", ValueKind::Count),
    setting("listpack_max_bytes", ValueKind::Bytes),
    setting("listpack_max_field_len", ValueKind::Count),
    setting("mem_defrag_threshold", ValueKind::Ratio),
    setting("mem_defrag_waste_threshold", ValueKind::Ratio),
    setting("mem_defrag_page_utilization_threshold", ValueKind::Ratio),
    setting("cache_mode", ValueKind::TrueFalse),
    setting("enable_heartbeat_eviction", ValueKind::TrueFalse),
    setting("max_eviction_per_heartbeat", ValueKind::Count),
    setting("maxmemory", ValueKind::Bytes),
];

/// Settings `engines[].args` takes beyond those of `config`: Dragonfly's thread count, which
/// the operator's memory check reads from args (`crd/dragonfly_memory.rs`).
pub const DRAGONFLY_ARGS_ONLY: &[Setting] = &[setting("proactor_threads", ValueKind::Count)];

/// The most settings one `config` holds (each is read back and carried in the result).
pub const MAX_CONFIG_SETTINGS: usize = 16;

/// The longest value of a setting.
pub const MAX_CONFIG_VALUE: usize = 32;

/// What a value may be made of, whatever the setting: numbers, units and words; never a space,
/// a quote or a line break, which a config line would read as more than one value.
pub const CONFIG_VALUE: &str = "^[A-Za-z0-9.-]+$";

/// A CEL list literal of the names of `settings`.
fn cel_names(settings: &[Setting]) -> String {
    let names: Vec<String> = settings.iter().map(|s| format!("'{}'", s.name)).collect();
    format!("[{}]", names.join(", "))
}

/// The CRD rule on an engine entry: every key of `config` is a setting of its engine.
pub fn config_names_rule() -> String {
    format!(
        "!has(self.config) || self.config.all(k, self.engine == 'dragonfly' ? k in {} : k in {})",
        cel_names(DRAGONFLY_SETTINGS),
        cel_names(REDIS_SETTINGS)
    )
}

/// The message of [`config_names_rule`], naming the first setting it refuses.
pub fn config_names_message() -> String {
    format!(
        "'config sets ' + self.config.filter(k, !(self.engine == 'dragonfly' ? k in {} : k in {}))[0] + ', which is not a memory-relevant setting membench lets a benchmark change for ' + self.engine + ' (the Write a spec page of the book lists them)'",
        cel_names(DRAGONFLY_SETTINGS),
        cel_names(REDIS_SETTINGS)
    )
}
