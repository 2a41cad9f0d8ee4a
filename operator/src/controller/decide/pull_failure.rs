//! What the operator adds to the kubelet's message when a pod's image cannot be pulled: the
//! registry the image comes from and the pull Secrets the pod presented to it. A registry that
//! refuses the credentials answers `401 Unauthorized`, and the kubelet's message names neither
//! the Secret it used nor which one to fix; the user who reads `ImagePullFailed` must learn
//! both from the status alone. Pure.

use k8s_openapi::api::core::v1::Pod;

/// The registry host an image reference is pulled from, as a container runtime reads it: the
/// first path component when it names a host (it has a dot or a port, or is `localhost`), else
/// Docker Hub, `docker.io` (`redis:8.2.3`, `valkey/valkey:9.1.2`).
pub fn registry_host(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            first
        }
        _ => "docker.io",
    }
}

/// The names of the pull Secrets a pod presents (`spec.imagePullSecrets`), in its order.
pub fn pull_secret_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.as_ref())
        .into_iter()
        .flatten()
        .map(|r| r.name.clone())
        .collect()
}

/// Whether the runtime's message says the registry has no such image (containerd: `...: not
/// found`; a registry's own `manifest unknown`), as opposed to refusing the credentials.
pub fn image_not_found(kubelet_message: &str) -> bool {
    let message = kubelet_message.to_ascii_lowercase();
    message.contains(": not found") || message.contains("manifest unknown")
}

/// The sentence that follows a pull failure of `image` by a pod in `namespace` that presented
/// the pull Secrets `secrets`, whose runtime said `kubelet_message`: the registry, and either
/// that it has no such image (a mirror that lacks a version: mirror it, or name an image it has)
/// or which Secrets to check or how to give one.
pub fn pull_failure_note(
    image: &str,
    kubelet_message: &str,
    secrets: &[String],
    namespace: &str,
) -> String {
    if !image_not_found(kubelet_message) {
        return credentials_note(image, secrets, namespace);
    }
    let host = registry_host(image);
    format!(
        "registry {host} answered that it has no image {image}: a mirror must hold every \
         version a benchmark asks for (copy it there, for example with skopeo copy --all from \
         the official image), or name an image it holds in engines[].image; with the chart's \
         engineRegistry (--engine-registry) every engine's default image comes from that mirror"
    )
}

/// The sentence that follows a pull failure of `image` by a pod in `namespace` that presented
/// the pull Secrets `secrets`: the registry, and which Secrets to check or how to give one.
pub fn credentials_note(image: &str, secrets: &[String], namespace: &str) -> String {
    let host = registry_host(image);
    if secrets.is_empty() {
        format!(
            "registry {host}; the pod presented no imagePullSecrets: if {host} needs \
             credentials, create a Secret of type kubernetes.io/dockerconfigjson for {host} in \
             namespace {namespace} and name it in spec.imagePullSecrets (or the chart value \
             benchmarkImagePullSecrets)"
        )
    } else {
        let plural = if secrets.len() == 1 { "" } else { "s" };
        format!(
            "registry {host}; the pod presented the imagePullSecret{plural} {} (namespace \
             {namespace}): check that {} holds credentials {host} accepts (a \
             kubernetes.io/dockerconfigjson Secret whose auths name {host})",
            secrets.join(", "),
            if secrets.len() == 1 { "it" } else { "one" },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_registry_host_is_the_first_component_only_when_it_names_a_host() {
        assert_eq!(
            registry_host("127.0.0.1:24000/library/redis:8.2.3"),
            "127.0.0.1:24000"
        );
        assert_eq!(
            registry_host("123456789012.dkr.ecr.us-east-1.amazonaws.com/valkey/valkey:9.1.2"),
            "123456789012.dkr.ecr.us-east-1.amazonaws.com"
        );
        assert_eq!(registry_host("localhost/membench:dev"), "localhost");
        assert_eq!(
            registry_host("docker.dragonflydb.io/dragonflydb/dragonfly:v1.40.0"),
            "docker.dragonflydb.io"
        );
        // Docker Hub's short names: a bare name and a user's repository.
        assert_eq!(registry_host("redis:8.2.3"), "docker.io");
        assert_eq!(registry_host("valkey/valkey:9.1.2"), "docker.io");
    }

    #[test]
    fn the_note_names_the_registry_and_every_secret_the_pod_presented() {
        let pod: Pod = serde_json::from_value(json!({
            "spec": {"containers": [], "imagePullSecrets": [{"name": "mirror"}, {"name": "regcred"}]}
        }))
        .unwrap();
        let secrets = pull_secret_names(&pod);
        assert_eq!(secrets, ["mirror", "regcred"]);
        let note = credentials_note(
            "mirror.example.com:5000/library/redis:8.2.3",
            &secrets,
            "team",
        );
        assert!(
            note.starts_with("registry mirror.example.com:5000; "),
            "{note}"
        );
        assert!(
            note.contains("imagePullSecrets mirror, regcred (namespace team)")
                && note
                    .contains("check that one holds credentials mirror.example.com:5000 accepts"),
            "{note}"
        );

        let one = credentials_note("mirror.example.com/redis:8", &["regcred".into()], "team");
        assert!(
            one.contains("the imagePullSecret regcred (namespace team): check that it holds"),
            "{one}"
        );
    }

    #[test]
    fn an_image_the_registry_does_not_have_is_named_as_missing_not_as_a_credentials_problem() {
        // containerd's message through the kubelet, for a tag the mirror lacks.
        let missing = "failed to pull and unpack image \"127.0.0.1:24000/library/redis:6.9.9\": failed to resolve reference \"127.0.0.1:24000/library/redis:6.9.9\": 127.0.0.1:24000/library/redis:6.9.9: not found";
        assert!(image_not_found(missing));
        assert!(image_not_found("manifest unknown: manifest unknown"));
        let note = pull_failure_note(
            "127.0.0.1:24000/library/redis:6.9.9",
            missing,
            &["mirror".into()],
            "team",
        );
        assert!(
            note.starts_with(
                "registry 127.0.0.1:24000 answered that it has no image 127.0.0.1:24000/library/redis:6.9.9"
            ) && note.contains("engines[].image")
                && note.contains("engineRegistry")
                && !note.contains("credentials"),
            "{note}"
        );
        // A refusal of the credentials keeps the Secrets' note.
        let refused =
            "failed to authorize: failed to fetch oauth token: unexpected status: 401 Unauthorized";
        assert!(!image_not_found(refused));
        assert_eq!(
            pull_failure_note(
                "mirror.example.com/redis:8",
                refused,
                &["regcred".into()],
                "team"
            ),
            credentials_note("mirror.example.com/redis:8", &["regcred".into()], "team")
        );
    }

    #[test]
    fn without_secrets_the_note_says_how_to_give_one() {
        let pod: Pod = serde_json::from_value(json!({"spec": {"containers": []}})).unwrap();
        let secrets = pull_secret_names(&pod);
        assert!(secrets.is_empty());
        let note = credentials_note("redis:8.2.3", &secrets, "team");
        assert!(
            note.contains("registry docker.io; the pod presented no imagePullSecrets")
                && note.contains("kubernetes.io/dockerconfigjson")
                && note.contains("spec.imagePullSecrets")
                && note.contains("benchmarkImagePullSecrets"),
            "{note}"
        );
    }
}
