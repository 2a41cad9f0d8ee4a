//! A plan's workload: the published workloads whole, and a profile's rebuild by its scale, seed
//! and the digest of its profile. The profile itself travels beside the plan (a file, or
//! `MEMBENCH_PROFILE`): a ConfigMap's profile can take up to 1 MiB, more than an environment
//! variable carries, and the digest makes sure the profile found there is the one planned.

use serde::{Deserialize, Serialize};

use crate::client::workloads::profile_workload::{ProfileWorkload, profile_digest};
use crate::client::workloads::rdb_load::RdbLoad;
use crate::client::workloads::workload::Workload;
use crate::crd::RecordLayout;
use crate::error::BenchError;
use crate::profile::Profile;

/// What to load, as [`Workload`] has it, a profile named by its digest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum WorkloadPlan {
    SortedSet {
        members: u64,
        key: String,
        sample_every: u64,
    },
    RandomStrings {
        requests: u64,
        keyspace: u64,
        value_size: u32,
        seed: u64,
    },
    Strings {
        keys: u64,
        value_size: u32,
    },
    Records {
        records: u64,
        layout: RecordLayout,
        fields: Vec<String>,
    },
    /// A profile's rebuild: the profile whose digest (`profile_digest`) this is, at `scale`
    /// keys and `element_scale` elements, drawn from `seed`.
    Profile {
        scale: f64,
        element_scale: f64,
        seed: u64,
        profile_digest: String,
    },
    /// Every key of the RDB file at `path` (read where the client runs), in
    /// PersistentVolumeClaim `claim` when it is one (mounted at `CLAIM_MOUNT_PATH`); or at
    /// the https `url` (then `path` is empty), fetched where the client runs with the
    /// credentials of the directory `credentials` (a client pod's mounted Secret).
    Rdb {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        claim: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials: Option<String>,
    },
}

impl WorkloadPlan {
    /// The plan of a checked workload.
    pub fn of(workload: &Workload) -> Self {
        match workload.clone() {
            Workload::SortedSet {
                members,
                key,
                sample_every,
            } => WorkloadPlan::SortedSet {
                members,
                key,
                sample_every,
            },
            Workload::RandomStrings {
                requests,
                keyspace,
                value_size,
                seed,
            } => WorkloadPlan::RandomStrings {
                requests,
                keyspace,
                value_size,
                seed,
            },
            Workload::Strings { keys, value_size } => WorkloadPlan::Strings { keys, value_size },
            Workload::Records {
                records,
                layout,
                fields,
            } => WorkloadPlan::Records {
                records,
                layout,
                fields,
            },
            Workload::Profile(rebuild) => WorkloadPlan::Profile {
                scale: rebuild.scale,
                element_scale: rebuild.element_scale,
                seed: rebuild.seed,
                profile_digest: rebuild
                    .profile
                    .as_deref()
                    .map(profile_digest)
                    .unwrap_or_default(),
            },
            // A fetched file is planned by its URL, never by where this process put its copy.
            Workload::Rdb(load) => match &load.url {
                Some(url) => WorkloadPlan::Rdb {
                    path: String::new(),
                    claim: None,
                    url: Some(url.clone()),
                    credentials: load.credentials.clone(),
                },
                None => WorkloadPlan::Rdb {
                    path: load.path.clone(),
                    claim: load.claim.clone(),
                    url: None,
                    credentials: None,
                },
            },
        }
    }

    /// The short name of its kind, as `--workload` takes it.
    pub fn kind(&self) -> &'static str {
        match self {
            WorkloadPlan::SortedSet { .. } => "sorted-set",
            WorkloadPlan::RandomStrings { .. } => "random-strings",
            WorkloadPlan::Strings { .. } => "strings",
            WorkloadPlan::Records { .. } => "records",
            WorkloadPlan::Profile { .. } => "profile",
            WorkloadPlan::Rdb { .. } => "rdb",
        }
    }

    /// The workload to load, checked. A profile's rebuild needs its profile (`profile`, with
    /// where it was read for the messages), which must be the one the plan names by digest.
    pub fn workload(&self, profile: Option<(Profile, String)>) -> Result<Workload, BenchError> {
        let invalid = |field: &str, message: String| BenchError::InvalidPlan {
            field: field.to_string(),
            message,
        };
        let workload = match self.clone() {
            WorkloadPlan::SortedSet {
                members,
                key,
                sample_every,
            } => Workload::SortedSet {
                members,
                key,
                sample_every,
            },
            WorkloadPlan::RandomStrings {
                requests,
                keyspace,
                value_size,
                seed,
            } => Workload::RandomStrings {
                requests,
                keyspace,
                value_size,
                seed,
            },
            WorkloadPlan::Strings { keys, value_size } => Workload::Strings { keys, value_size },
            WorkloadPlan::Records {
                records,
                layout,
                fields,
            } => Workload::Records {
                records,
                layout,
                fields,
            },
            // Fetched where it runs ([`Workload::fetched`]), not where it is planned.
            WorkloadPlan::Rdb {
                url: Some(url),
                credentials,
                ..
            } => Workload::Rdb(RdbLoad::at_url(&url, credentials)),
            WorkloadPlan::Rdb {
                path,
                claim,
                url: None,
                ..
            } => Workload::Rdb(RdbLoad::scan_in_claim(
                &path,
                claim.as_deref(),
                "workload.path",
            )?),
            WorkloadPlan::Profile {
                scale,
                element_scale,
                seed,
                profile_digest: planned,
            } => {
                let Some((profile, origin)) = profile else {
                    return Err(invalid(
                        "workload.profile_digest",
                        format!(
                            "names profile {planned}, and no profile was given: pass --profile FILE (or the profile in $MEMBENCH_PROFILE)"
                        ),
                    ));
                };
                let digest = profile_digest(&profile);
                if digest != planned {
                    return Err(invalid(
                        "workload.profile_digest",
                        format!(
                            "is {planned}, and {origin} is another profile (digest {digest}): its ConfigMap or file changed after the plan was made; delete and re-create the MemoryBenchmark (or make the plan again) to run the new profile"
                        ),
                    ));
                }
                Workload::Profile(
                    ProfileWorkload::new(profile, scale, element_scale, seed)
                        .map_err(|message| invalid("workload", format!("{origin}: {message}")))?,
                )
            }
        };
        workload.validate().map_err(|e| match e {
            BenchError::InvalidArgument { field, message } => {
                invalid(&format!("workload ({field})"), message)
            }
            other => other,
        })?;
        Ok(workload)
    }
}
