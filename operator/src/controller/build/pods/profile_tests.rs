//! A profile workload in a spec: validated before anything starts, and carried whole into the
//! client pod, which rebuilds it with `membench load --workload profile`.

use super::*;
use crate::client::measurement::plan::{RunPlan, WorkloadPlan};
use crate::client::workloads::profile_workload::{PROFILE_ENV, profile_digest};
use crate::client::workloads::workload::Workload;
use crate::profile::Profile;
use crate::validation::spec_file::parse_specs;

/// A MemoryBenchmark with a small inline profile (1000 hashes of 4 fields), at `scale`, with a
/// group share and an engine memory to spoil it.
fn with_profile(share: &str, scale: &str, memory: &str) -> Result<MemoryBenchmark, String> {
    let yaml = format!(
        r#"apiVersion: membench.io/v1alpha1
kind: MemoryBenchmark
metadata: {{name: shop, namespace: bench}}
spec:
  instanceType: r8g.4xlarge
  engines: [{{engine: valkey, version: "9.1.2"{memory}}}]
  workload:
    profile:
      source: {{keys: 1000}}
      scale: {scale}
      seed: 9
      groups:
      - template: "user:{{n}}"
        type: hash
        share: {share}
        keyLength: {{buckets: [[9, 9, 1]]}}
        elements: {{buckets: [[4, 4, 1]]}}
        fields: {{textLength: {{buckets: [[5, 5, 1]]}}}}
        values: {{integerShare: 0.5, textLength: {{buckets: [[6, 6, 1]]}}, integerLength: {{buckets: [[2, 2, 1]]}}}}
"#
    );
    let mut b = parse_specs(&yaml)?.remove(0);
    b.metadata.uid = Some("uid-1".into());
    Ok(b)
}

/// Each engine entry's plan, as the operator's validation makes them.
fn plans(b: &MemoryBenchmark) -> Vec<RunPlan> {
    crate::validation::validate(b).unwrap().plans
}

#[test]
fn an_inline_profile_becomes_the_plans_workload_and_the_profile_in_the_client_pods_environment() {
    let b = with_profile("1.0", "3", "").unwrap();
    let workload = Workload::from_spec(&b.spec.workload).unwrap();
    let Workload::Profile(profile) = &workload else {
        panic!("{workload:?}")
    };
    assert_eq!(profile.keys, 3000);
    let pod = client_pod(&b, 0, 1, &plans(&b), "127.1.0.5", &PodSettings::default());
    let plan = plan_of_client_pod(&pod).unwrap().unwrap();
    assert_eq!(
        plan.workload,
        WorkloadPlan::Profile {
            scale: 3.0,
            element_scale: 1.0,
            seed: 9,
            profile_digest: profile_digest(profile.profile.as_deref().unwrap()),
        }
    );
    let env = pod.spec.unwrap().containers[0].env.clone().unwrap();
    let carried = env
        .iter()
        .find(|e| e.name == PROFILE_ENV)
        .and_then(|e| e.value.clone())
        .expect("the profile in the client's environment");
    let carried = Profile::parse(&carried).unwrap();
    assert_eq!(
        carried,
        b.spec.workload.profile.as_ref().unwrap().profile().unwrap()
    );
}

#[test]
fn a_profile_whose_shares_do_not_add_up_is_refused_naming_the_field() {
    let err = with_profile("0.6", "3", "").unwrap_err();
    assert!(
        err.contains("spec.workload.profile") && err.contains("add up to 0.6000"),
        "{err}"
    );
}

#[test]
fn a_rebuild_larger_than_the_engine_pods_memory_is_refused_before_it_starts() {
    // 1000 hashes of 4 fields, 100,000 times: about 30 GiB, not in 1 GiB.
    let err = with_profile("1.0", "100000", ", memory: 1Gi")
        .map(|_| ())
        .unwrap_err();
    assert!(
        err.contains("spec.engines[0].memory is 1Gi") && err.contains("needs about"),
        "{err}"
    );
    with_profile("1.0", "3", ", memory: 1Gi").expect("3000 keys fit");
}

#[test]
fn a_profile_from_a_config_map_is_mounted_from_it_as_a_file_with_the_digest_checked() {
    let mut b = with_profile("1.0", "1", "").unwrap();
    let spec = b.spec.workload.profile.as_mut().unwrap();
    spec.config_map_ref = Some(crate::crd::ProfileConfigMapRef {
        name: "shop-profile".into(),
        key: "shop.yaml".into(),
    });
    let profile = spec.profile().unwrap();
    let pod = client_pod(&b, 0, 1, &plans(&b), "127.1.0.5", &PodSettings::default());
    let plan = plan_of_client_pod(&pod).unwrap().unwrap();
    assert!(
        matches!(&plan.workload, WorkloadPlan::Profile { profile_digest: d, .. } if *d == profile_digest(&profile)),
        "{plan:?}"
    );
    let pod_spec = pod.spec.unwrap();
    let container = &pod_spec.containers[0];
    let args = container.args.clone().unwrap().join(" ");
    assert!(
        args.ends_with("--profile /etc/membench/profile/profile"),
        "{args}"
    );
    let env = container.env.clone().unwrap();
    assert!(
        env.iter().all(|e| e.name != PROFILE_ENV),
        "the profile is not in the environment too"
    );
    let digest = env
        .iter()
        .find(|e| e.name == crate::client::workloads::profile_workload::PROFILE_DIGEST_ENV)
        .and_then(|e| e.value.clone())
        .expect("the digest of the profile the operator checked");
    assert_eq!(digest, profile_digest(&profile));
    let volume = &pod_spec.volumes.unwrap()[0];
    let config_map = volume.config_map.as_ref().unwrap();
    assert_eq!(config_map.name, "shop-profile");
    let items = config_map.items.as_ref().unwrap();
    assert_eq!(
        (items[0].key.as_str(), items[0].path.as_str()),
        ("shop.yaml", "profile")
    );
    let mount = &container.volume_mounts.as_ref().unwrap()[0];
    assert_eq!(
        (
            mount.name.as_str(),
            mount.mount_path.as_str(),
            mount.read_only
        ),
        (volume.name.as_str(), "/etc/membench/profile", Some(true))
    );
}
