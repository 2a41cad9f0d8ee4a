//! The data to load: one of the workloads and their defaults.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::formats::{MAX_SAMPLES, MIN_SAMPLE_EVERY, message};
use crate::profile::model::{KeyGroup, PROFILE_FORMAT, Profile, ProfileSource, SHARE_TOLERANCE};

/// The CEL rule of every workload with a TTL: `ttlShare` only with `ttlSeconds` (the share of
/// items that get a TTL means nothing without one).
const TTL_SHARE_RULE: &str = "!has(self.ttlShare) || has(self.ttlSeconds)";

/// The CEL rule of an inline profile: its groups' shares add up to 1 within
/// [`SHARE_TOLERANCE`], as [`Profile::check`] accepts them (the same sum, in the same order).
/// A profile from a ConfigMap is checked by the operator, which reads it.
fn shares_add_up_rule() -> String {
    format!(
        "!has(self.groups) || (self.groups.map(g, g.share).sum() - 1.0 <= {SHARE_TOLERANCE} && 1.0 - self.groups.map(g, g.share).sum() <= {SHARE_TOLERANCE})"
    )
}

/// What [`shares_add_up_rule`] says: whether the shares fall short of 1 or go past it. (The
/// sum itself cannot be in the message: the API server estimates a string built from a number
/// as unbounded, and refuses the CRD.)
fn shares_add_up_message() -> String {
    let why = "each share is its group's part of the keys, so make them add up to 1, as membench profile prints them";
    format!(
        "self.groups.map(g, g.share).sum() < 1.0 ? \"the shares of workload.profile.groups add up to less than 1 (short of it by more than {SHARE_TOLERANCE}): {why}\" : \"the shares of workload.profile.groups add up to more than 1 (past it by more than {SHARE_TOLERANCE}): {why}\""
    )
}

/// The data to load. Exactly one of the workloads must be set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("[has(self.sortedSet), has(self.randomStrings), has(self.strings), has(self.records), has(self.profile), has(self.rdb)].filter(x, x).size() == 1").message("set exactly one of workload.sortedSet, workload.randomStrings, workload.strings, workload.records, workload.profile, workload.rdb"))]
pub struct WorkloadSpec {
    /// N members `m:{i}` with integer scores `i` added to ONE sorted set by pipelined
    /// `ZADD key NX score member` (the published 50-million-member sorted-set benchmark).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sorted_set: Option<SortedSetWorkload>,

    /// `valkey-benchmark -t set -n <requests> -r <keyspace> -d <valueSize>`: SETs of keys drawn
    /// uniformly at random from a key space, so some keys repeat (1,000,000 requests over a
    /// 1,000,000-key space store about 632,000 keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random_strings: Option<RandomStringsWorkload>,

    /// Exactly N distinct string keys with values of a fixed size, verified with `DBSIZE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strings: Option<StringsWorkload>,

    /// N user records of a few fields, stored as one hash per record or as one string key per
    /// field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<RecordsWorkload>,

    /// A keyspace rebuilt from its profile (what `membench profile` prints): inline (its
    /// `format`, `source` and `groups`) or from a ConfigMap (`configMapRef`), with `scale`,
    /// `elementScale` and `seed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("has(self.groups) != has(self.configMapRef)").message("set workload.profile inline (source and groups) or as configMapRef, not both"))]
    #[x_kube(validation = Rule::new("has(self.groups) == has(self.source)").message("an inline workload.profile has both source and groups"))]
    #[x_kube(validation = Rule::new(shares_add_up_rule()).message(Message::Expression(shares_add_up_message())).field_path(".groups"))]
    #[x_kube(validation = Rule::new("!has(self.scale) || (self.scale > 0.0 && self.scale <= 1000000.0)").message("workload.profile.scale is a factor above 0 (1 keeps the profile's size), at most 1000000"))]
    #[x_kube(validation = Rule::new("!has(self.elementScale) || (self.elementScale > 0.0 && self.elementScale <= 1000000.0)").message("workload.profile.elementScale is a factor above 0 (1 keeps the profile's element counts), at most 1000000"))]
    pub profile: Option<ProfileWorkloadSpec>,

    /// Every key of an RDB file (a backup Redis, Valkey or Dragonfly saved) written into each
    /// engine with its type, elements and TTL; keys already expired, module values and empty
    /// streams are skipped and counted. The file is a path on the machine that runs
    /// `membench run`, a path inside a PersistentVolumeClaim (in a cluster), or an https URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("has(self.path) != has(self.url)").message("set one of workload.rdb.path and workload.rdb.url"))]
    #[x_kube(validation = Rule::new("!has(self.credentialsSecret) || has(self.url)").message("workload.rdb.credentialsSecret holds the credentials for a url: set url, or remove credentialsSecret"))]
    pub rdb: Option<RdbWorkloadSpec>,
}

/// A profile to rebuild, and how.
// Its CEL rules are WorkloadSpec's: a struct with a field the schema skips cannot derive
// KubeSchema.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileWorkloadSpec {
    /// The profile format (1).
    #[serde(default = "default_profile_format")]
    pub format: u32,
    /// Where the profile was taken: `keys` (its DBSIZE) is how many keys a rebuild stores,
    /// times `scale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ProfileSource>,
    /// The keys by key-name template and type; their shares add up to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10_000))]
    pub groups: Option<Vec<KeyGroup>>,
    /// What the profiler noted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Store this many times the profile's keys.
    #[serde(default = "default_scale")]
    pub scale: f64,
    /// Grow the element counts of hashes, sets, sorted sets, lists and streams by this factor.
    #[serde(default = "default_scale")]
    pub element_scale: f64,
    /// The profile in a ConfigMap of the benchmark's namespace, instead of inline: the
    /// operator reads it before anything starts (a profile is often larger than a spec
    /// should be).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<ProfileConfigMapRef>,
    /// Seed of the rebuild's draws: the same seed is the same data on every engine.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Why the profile cannot be used (its ConfigMap could not be read, or an inline one is
    /// too large for the client pod's environment): set by the operator, never by a spec.
    #[serde(skip)]
    #[schemars(skip)]
    pub unresolved: Option<String>,
}

/// A ConfigMap key holding a profile.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileConfigMapRef {
    /// The ConfigMap's name, in the benchmark's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key whose value is the profile (YAML or JSON).
    #[serde(default = "default_profile_key")]
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

pub fn default_profile_key() -> String {
    "profile.yaml".to_string()
}

fn default_profile_format() -> u32 {
    PROFILE_FORMAT
}

fn default_scale() -> f64 {
    1.0
}

impl ProfileWorkloadSpec {
    /// The profile the spec holds (inline, or read from its ConfigMap by the operator), or
    /// why there is none.
    pub fn profile(&self) -> Result<Profile, String> {
        if let Some(why) = &self.unresolved {
            return Err(why.clone());
        }
        match (&self.source, &self.groups, &self.config_map_ref) {
            (Some(source), Some(groups), _) => Ok(Profile {
                format: self.format,
                source: source.clone(),
                groups: groups.clone(),
                notes: self.notes.clone(),
            }),
            (_, _, Some(reference)) => Err(self.unresolved.clone().unwrap_or_else(|| {
                format!(
                    "the profile of configMapRef {}/{} is read by the operator in a cluster; membench run needs the profile inline (source and groups)",
                    reference.name, reference.key
                )
            })),
            _ => Err("set the profile inline (source and groups) or configMapRef".into()),
        }
    }

    /// The spec with `profile` (read from the ConfigMap) inline, or with why it could not be
    /// read.
    pub fn resolved(&self, profile: Result<Profile, String>) -> Self {
        let mut spec = self.clone();
        match profile {
            Ok(profile) => {
                spec.format = profile.format;
                spec.source = Some(profile.source);
                spec.groups = Some(profile.groups);
                spec.notes = profile.notes;
            }
            Err(why) => spec.unresolved = Some(why),
        }
        spec
    }
}

/// Members into one sorted set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(TTL_SHARE_RULE).message(message::TTL_SHARE_WITHOUT_SECONDS).field_path(".ttlShare"))]
#[x_kube(validation = Rule::new(format!("!has(self.sampleEvery) || self.sampleEvery == 0 || self.members / self.sampleEvery <= {MAX_SAMPLES}")).message(message::SAMPLES_PER_REPETITION))]
pub struct SortedSetWorkload {
    /// How many members to add (the published benchmark used 50,000,000).
    #[schemars(range(min = 1, max = 2_000_000_000u64))]
    pub members: u64,

    /// The key of the sorted set.
    #[serde(default = "default_sorted_set_key")]
    #[schemars(length(min = 1, max = 512))]
    pub key: String,

    /// Read used_memory every this many members, for a growth curve (the published tool read
    /// it every million). 0 turns the curve off; otherwise at least 1000, and at most 100,000
    /// readings per repetition.
    #[serde(default = "default_sample_every")]
    #[schemars(range(max = 2_000_000_000u64))]
    #[x_kube(validation = Rule::new(format!("self == 0 || self >= {MIN_SAMPLE_EVERY}")).message(message::SAMPLE_EVERY))]
    pub sample_every: u64,

    #[serde(flatten)]
    pub ttl: TtlSpec,
}

/// Keys with a TTL, which every workload takes: the TTL is set with the write, and must outlive
/// the load and its readings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct TtlSpec {
    /// Give items a TTL of this many seconds, set with the write (`SET ... EX`, `EXPIRE` after
    /// `HSET` and after the sorted set's first `ZADD`), to see what an expiry costs per item.
    /// Nothing may expire before the final reading: at least 60 seconds more than
    /// `settleSeconds`, and a repetition whose load and readings outlast it fails as
    /// `TtlTooShort`. At most 315360000 (ten years).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 315_360_000))]
    pub ttl_seconds: Option<u32>,

    /// The share of items that get the TTL, above 0 and at most 1 (the default with
    /// `ttlSeconds`), spread evenly over the items. Only with `ttlSeconds`; the sorted set,
    /// one key, takes 1 only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.000001, max = 1.0))]
    pub ttl_share: Option<f64>,
}

pub fn default_sorted_set_key() -> String {
    "membench:zset".to_string()
}

pub fn default_sample_every() -> u64 {
    1_000_000
}

/// SETs of random keys, as `valkey-benchmark -t set -r` sends them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(TTL_SHARE_RULE).message(message::TTL_SHARE_WITHOUT_SECONDS).field_path(".ttlShare"))]
pub struct RandomStringsWorkload {
    /// How many SET commands to send (`-n`).
    #[schemars(range(min = 1, max = 2_000_000_000u64))]
    pub requests: u64,

    /// How many distinct keys the random keys are drawn from (`-r`); keys are named
    /// `key:` followed by a 12-digit zero-padded number, as valkey-benchmark names them.
    #[schemars(range(min = 1, max = 999_999_999_999u64))]
    pub keyspace: u64,

    /// Value size in bytes (`-d`).
    #[serde(default = "default_random_value_size")]
    #[schemars(range(min = 1, max = 536_870_912))]
    pub value_size: u32,

    /// Seed of the key generator, so a run can be repeated key for key.
    #[serde(default = "default_seed")]
    pub seed: u64,

    #[serde(flatten)]
    pub ttl: TtlSpec,
}

fn default_random_value_size() -> u32 {
    16
}

pub fn default_seed() -> u64 {
    0x6d65_6d62_656e_6368
}

/// Exactly N distinct keys.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(TTL_SHARE_RULE).message(message::TTL_SHARE_WITHOUT_SECONDS).field_path(".ttlShare"))]
pub struct StringsWorkload {
    /// How many distinct keys to store (`key:` and a 12-digit zero-padded number, 0 to N-1).
    #[schemars(range(min = 1, max = 2_000_000_000u64))]
    pub keys: u64,

    /// Value size in bytes.
    #[serde(default = "default_strings_value_size")]
    #[schemars(range(min = 1, max = 536_870_912))]
    pub value_size: u32,

    #[serde(flatten)]
    pub ttl: TtlSpec,
}

fn default_strings_value_size() -> u32 {
    100
}

/// User records of a few fields.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(TTL_SHARE_RULE).message(message::TTL_SHARE_WITHOUT_SECONDS).field_path(".ttlShare"))]
pub struct RecordsWorkload {
    /// How many records to store.
    #[schemars(range(min = 1, max = 2_000_000_000u64))]
    pub records: u64,

    /// `hash`: one hash per record (`HSET user:{i} name … age …`); `strings`: one string key
    /// per field (`SET user:{i}:name …`).
    #[serde(default)]
    pub layout: RecordLayout,

    /// The field names of a record, filled with realistic values (names, ages, cities and
    /// scores cycle through fixed lists; any other field gets a short text).
    #[serde(default = "default_record_fields")]
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub fields: Vec<String>,

    #[serde(flatten)]
    pub ttl: TtlSpec,
}

pub fn default_record_fields() -> Vec<String> {
    ["name", "age", "city", "score"].map(String::from).to_vec()
}

/// How a record is stored.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum RecordLayout {
    #[default]
    Hash,
    Strings,
}

impl RecordLayout {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordLayout::Hash => "hash",
            RecordLayout::Strings => "strings",
        }
    }
}

/// An RDB file to load.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RdbWorkloadSpec {
    /// The file (a dump.rdb, uncompressed). For `membench run`, its path on the machine that
    /// runs it. In a cluster, its path inside `persistentVolumeClaim`, relative to the
    /// claim's root (for example `backups/dump.rdb`). Set `path` or `url`, not both.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// The file at an https URL (a presigned URL works: its query is never shown). Fetched
    /// into the client's temporary directory, read there, then removed: in a cluster once per
    /// engine entry, into an emptyDir of its client pod (so the node needs room for the file);
    /// in a local run once for all the entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The Secret, in the benchmark's namespace, with the credentials for `url`: keys
    /// `username` and `password` (basic authentication) or `token` (a bearer token), and
    /// `ca.crt` (a PEM CA that signed the server's certificate), each optional. Mounted
    /// read-only into each client pod. `membench run` refuses it: locally,
    /// `membench load --rdb URL --rdb-credentials DIR` reads the same keys from files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret: Option<RdbCredentialsSecret>,
    /// In a cluster, the claim that holds the file: mounted read-only into each client pod.
    /// `membench run` refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<RdbVolumeClaim>,
    /// Why the claim cannot be used (the operator found no such claim in the namespace): set
    /// by the operator, never by a spec.
    #[serde(skip)]
    #[schemars(skip)]
    pub unresolved: Option<String>,
}

impl WorkloadSpec {
    /// The PersistentVolumeClaim of an RDB workload whose file is in one (a cluster's).
    pub fn rdb_claim(&self) -> Option<&RdbVolumeClaim> {
        self.rdb.as_ref()?.persistent_volume_claim.as_ref()
    }

    /// The Secret with the credentials for an RDB workload's URL.
    pub fn rdb_credentials(&self) -> Option<&RdbCredentialsSecret> {
        self.rdb.as_ref()?.credentials_secret.as_ref()
    }
}

/// A Secret holding the credentials for an RDB file's URL.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RdbCredentialsSecret {
    /// The Secret's name, in the benchmark's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A PersistentVolumeClaim holding an RDB file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RdbVolumeClaim {
    /// The claim's name, in the benchmark's namespace. Where engine entries run on
    /// different nodes, it needs the `ReadOnlyMany` or `ReadWriteMany` access mode.
    #[schemars(length(min = 1, max = 253))]
    pub claim_name: String,
}
