//! A profile workload's `configMapRef`: the operator reads the ConfigMap before it decides
//! anything, and puts the profile inline into the spec it decides from (and so into the
//! client pod). A ConfigMap that is missing, lacks the key or holds no valid profile makes
//! the spec invalid, with a message saying which and what to do; nothing starts. The client
//! pod reads such a profile from the ConfigMap mounted as a file (up to the ConfigMap's
//! 1 MiB); an inline one travels in its environment, and one too large for it
//! ([`crate::client::workloads::profile_workload::MAX_PROFILE_ENV_BYTES`]) makes the spec invalid too.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::{Client, ResourceExt};

use crate::crd::{MemoryBenchmark, ProfileConfigMapRef, ProfileWorkloadSpec};
use crate::profile::Profile;

/// The profile a ConfigMap (or its absence) gives.
pub fn profile_from(
    reference: &ProfileConfigMapRef,
    namespace: &str,
    config_map: Option<&ConfigMap>,
) -> Result<Profile, String> {
    let name = &reference.name;
    let key = &reference.key;
    let Some(config_map) = config_map else {
        return Err(format!(
            "workload.profile.configMapRef: ConfigMap {name} is not in namespace {namespace}: create it with the profile under key {key} (kubectl create configmap {name} -n {namespace} --from-file={key}=profile.yaml)"
        ));
    };
    let data = config_map.data.clone().unwrap_or_default();
    let Some(text) = data.get(key) else {
        let keys: Vec<&String> = data.keys().collect();
        return Err(format!(
            "workload.profile.configMapRef: ConfigMap {name} has no key {key} (its keys: {keys:?}): set configMapRef.key to the key that holds the profile"
        ));
    };
    Profile::parse(text)
        .map_err(|e| format!("workload.profile.configMapRef: ConfigMap {name} key {key}: {e}"))
}

/// An inline profile as the operator decides from it: refused (with why) when it is too large
/// for the client pod's environment, which carries it.
pub fn inline_checked(spec: &ProfileWorkloadSpec) -> ProfileWorkloadSpec {
    match spec.profile() {
        Ok(profile) => {
            match crate::client::workloads::profile_workload::fits_in_environment(&profile) {
                Ok(()) => spec.clone(),
                Err(why) => spec.resolved(Err(format!("workload.profile: {why}"))),
            }
        }
        Err(_) => spec.clone(),
    }
}

/// The benchmark with its ConfigMap's profile inline, or with why it could not be read. An
/// API error other than a refusal is returned, to be retried.
pub async fn resolve(
    client: &Client,
    mut benchmark: MemoryBenchmark,
) -> Result<MemoryBenchmark, kube::Error> {
    let Some(spec) = &benchmark.spec.workload.profile else {
        return Ok(benchmark);
    };
    let Some(reference) = &spec.config_map_ref else {
        benchmark.spec.workload.profile = Some(inline_checked(spec));
        return Ok(benchmark);
    };
    let namespace = benchmark.namespace().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let profile = match api.get_opt(&reference.name).await {
        Ok(config_map) => profile_from(reference, &namespace, config_map.as_ref()),
        Err(kube::Error::Api(status)) if status.code == 403 => Err(format!(
            "workload.profile.configMapRef: the operator may not read ConfigMap {} in namespace {namespace} ({}): grant it get on configmaps (the chart's RBAC does)",
            reference.name, status.message
        )),
        Err(e) => return Err(e),
    };
    let resolved = spec.resolved(profile);
    benchmark.spec.workload.profile = Some(resolved);
    Ok(benchmark)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference() -> ProfileConfigMapRef {
        ProfileConfigMapRef {
            name: "shop-profile".into(),
            key: "profile.yaml".into(),
        }
    }

    fn config_map(key: &str, text: &str) -> ConfigMap {
        ConfigMap {
            data: Some([(key.to_string(), text.to_string())].into()),
            ..ConfigMap::default()
        }
    }

    const PROFILE: &str = "format: 1\nsource: {keys: 5}\ngroups:\n- {template: \"k:{n}\", type: string, share: 1.0, keyLength: {buckets: [[4, 4, 1]]}, values: {textLength: {buckets: [[3, 3, 1]]}}}\n";

    #[test]
    fn a_missing_config_map_or_key_says_how_to_create_it() {
        let err = profile_from(&reference(), "bench", None).unwrap_err();
        assert!(err.contains("kubectl create configmap shop-profile -n bench --from-file=profile.yaml=profile.yaml"), "{err}");
        let err =
            profile_from(&reference(), "bench", Some(&config_map("other", PROFILE))).unwrap_err();
        assert!(
            err.contains("has no key profile.yaml") && err.contains("\"other\""),
            "{err}"
        );
    }

    #[test]
    fn the_config_maps_profile_is_checked_and_put_inline() {
        let profile = profile_from(
            &reference(),
            "bench",
            Some(&config_map("profile.yaml", PROFILE)),
        )
        .unwrap();
        assert_eq!(profile.source.keys, 5);
        let bad = PROFILE.replace("share: 1.0", "share: 0.5");
        let err = profile_from(
            &reference(),
            "bench",
            Some(&config_map("profile.yaml", &bad)),
        )
        .unwrap_err();
        assert!(
            err.contains("ConfigMap shop-profile key profile.yaml")
                && err.contains("add up to 0.5000"),
            "{err}"
        );
    }

    /// A profile of `groups` groups of strings, as a keyspace of many key families gives.
    pub(crate) fn many_groups(groups: usize) -> String {
        let mut text = format!("format: 1\nsource: {{keys: {}}}\ngroups:\n", groups * 4);
        for g in 0..groups {
            text.push_str(&format!(
                "- {{template: \"family{g}:{{n}}\", type: string, share: {}, sampledKeys: 4, keyLength: {{buckets: [[12, 12, 2], [13, 13, 2]]}}, ttl: {{share: 0.5, millis: {{buckets: [[1000, 5000, 2]]}}}}, values: {{integerShare: 0.25, textLength: {{buckets: [[10, 20, 3]]}}, integerLength: {{buckets: [[2, 4, 1]]}}}}}}\n",
                1.0 / groups as f64
            ));
        }
        text
    }

    #[test]
    fn an_inline_profile_too_large_for_the_environment_is_refused_naming_its_size_and_the_limit() {
        let inline = |text: &str| {
            ProfileWorkloadSpec {
                format: 1,
                source: None,
                groups: None,
                notes: Vec::new(),
                scale: 1.0,
                element_scale: 1.0,
                config_map_ref: None,
                seed: 1,
                unresolved: None,
            }
            .resolved(Profile::parse(text))
        };
        let small = inline(&many_groups(10));
        assert_eq!(inline_checked(&small), small);
        let large = inline_checked(&inline(&many_groups(600)));
        let err = large.profile().unwrap_err();
        assert!(
            err.starts_with("workload.profile: the inline profile takes")
                && err.contains("more than the 120 KiB")
                && err.contains("configMapRef"),
            "{err}"
        );
        let kib: usize = err
            .split("takes ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("the size in KiB");
        assert!(kib > 120, "{err}");
    }
}
