//! Puts a benchmark's NetworkPolicy ([`network_policy`]) in place before its first pod:
//! creates it, or replaces one an earlier benchmark of the same name left behind.

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

use crate::controller::build::network_policy::{
    ExistingPolicy, NetworkPolicySettings, classify_existing, network_policy,
};
use crate::controller::build::pods::{LABEL_MANAGED_BY, MANAGER};
use crate::crd::MemoryBenchmark;

/// Why the benchmark's NetworkPolicy could not be put in place.
#[derive(Debug, thiserror::Error)]
pub enum EnsureError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error(
        "NetworkPolicy {namespace}/{name} exists and was not made by membench (it lacks the \
         label {LABEL_MANAGED_BY}={MANAGER}); membench will not replace a policy it did not \
         make: rename the benchmark, or delete that policy if it is not needed"
    )]
    Foreign { namespace: String, name: String },
    #[error(
        "NetworkPolicy {namespace}/{name} of an earlier benchmark of the same name was \
         replaced {attempts} times and came back each time; another operator may be managing \
         this namespace"
    )]
    KeptComingBack {
        namespace: String,
        name: String,
        attempts: u32,
    },
}

/// How often a stale policy is replaced before [`ensure`] gives up.
const REPLACE_ATTEMPTS: u32 = 3;

/// Creates the benchmark's NetworkPolicy, or makes sure the one of that name is its own: a
/// stale one (see [`ExistingPolicy::Stale`]) is deleted, on the condition that it is still that
/// object, and created again as this benchmark's; a foreign one is an error.
pub async fn ensure(
    client: &kube::Client,
    benchmark: &MemoryBenchmark,
    settings: &NetworkPolicySettings,
) -> Result<(), EnsureError> {
    let namespace = benchmark.namespace().unwrap_or_default();
    let api: Api<NetworkPolicy> = Api::namespaced(client.clone(), &namespace);
    let wanted = network_policy(benchmark, settings);
    let name = wanted.name_any();
    for _ in 0..REPLACE_ATTEMPTS {
        match api.create(&PostParams::default(), &wanted).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            Err(e) => return Err(e.into()),
        }
        // Gone since the create was refused: create it again.
        let Some(existing) = api.get_opt(&name).await? else {
            continue;
        };
        match classify_existing(&existing, benchmark) {
            ExistingPolicy::Ours => return Ok(()),
            ExistingPolicy::Foreign => return Err(EnsureError::Foreign { namespace, name }),
            ExistingPolicy::Stale(uid) => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteParams::background()
                };
                match api.delete(&name, &params).await {
                    Ok(_) => {}
                    // Already gone (the garbage collector came first), or another object
                    // by now: the next create decides.
                    Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    Err(EnsureError::KeptComingBack {
        namespace,
        name,
        attempts: REPLACE_ATTEMPTS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_policy_is_refused_naming_it_and_what_to_do() {
        let message = EnsureError::Foreign {
            namespace: "bench".into(),
            name: "zset".into(),
        }
        .to_string();
        assert!(
            message.contains("bench/zset") && message.contains("rename the benchmark"),
            "{message}"
        );
    }
}
