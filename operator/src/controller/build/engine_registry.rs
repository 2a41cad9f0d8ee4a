//! The operator's engine mirror (`--engine-registry`, chart value `engineRegistry`): one
//! registry that holds the official engine images under their Docker Hub names, so that a team
//! behind a pull-through cache (ECR, Artifactory, Harbor) or an image allowlist sets it once
//! instead of `engines[].image` in every entry of every spec. Every engine entry without its
//! own `image` runs `MIRROR/library/redis:<v>`, `MIRROR/valkey/valkey:<v>` or
//! `MIRROR/dragonflydb/dragonfly:v<v>`, and the mirror's three repositories join the allowed
//! images. Pure: parsed once at operator start, read by the pods, the policy and the status.

use crate::crd::{EngineKind, EngineSpec};

/// A registry host with an optional port and path, checked to be one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineRegistry(String);

/// What `--engine-registry` takes, for its messages.
const FORM: &str = "HOST[:PORT][/PATH], such as 123456789012.dkr.ecr.eu-west-1.amazonaws.com/docker-hub, mirror.example.com:5000 or localhost:5000/engines";

impl EngineRegistry {
    /// Checks `value` is a registry host (lowercase DNS name or IPv4 address with a dot, a port
    /// or `localhost`, so that a node never reads it as a Docker Hub repository), with an
    /// optional port and a lowercase repository path, and no scheme, tag, digest or spaces. One
    /// trailing `/` is dropped.
    pub fn parse(value: &str) -> Result<Self, String> {
        let refuse = |why: String| {
            Err(format!(
                "--engine-registry (chart value engineRegistry) '{value}' is not a registry host: {why}; give {FORM}"
            ))
        };
        if value.is_empty() {
            return refuse("it is empty".into());
        }
        if value.chars().any(char::is_whitespace) {
            return refuse("it contains spaces".into());
        }
        if let Some((scheme, _)) = value.split_once("://") {
            return refuse(format!(
                "it starts with a scheme ({scheme}://); nodes pull over HTTPS from the host itself"
            ));
        }
        if value.contains('@') {
            return refuse(
                "it holds a digest ('@'); the mirror is a registry, not an image".into(),
            );
        }
        let trimmed = value.strip_suffix('/').unwrap_or(value);
        let (authority, path) = trimmed.split_once('/').unwrap_or((trimmed, ""));
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        if host.is_empty() {
            return refuse("it has no host".into());
        }
        if host.chars().any(|c| c.is_ascii_uppercase()) {
            return refuse(format!(
                "the host '{host}' has uppercase letters; registry hosts are lowercase"
            ));
        }
        let label_ok = |label: &str| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        };
        if !host.split('.').all(label_ok) {
            return refuse(format!(
                "the host '{host}' is not a DNS name or IPv4 address (lowercase letters, digits and '-', dot-separated)"
            ));
        }
        if let Some(port) = port
            && !port.parse::<u16>().is_ok_and(|p| p > 0)
        {
            return refuse(format!(
                "the port '{port}' is not a number from 1 to 65535 (a ':tag' belongs to an image, not to a registry)"
            ));
        }
        if !host.contains('.') && port.is_none() && host != "localhost" {
            return refuse(format!(
                "'{host}' has no dot and no port, so a node would read it as a Docker Hub repository (docker.io/{host}/...)"
            ));
        }
        if !path.is_empty() {
            for component in path.split('/') {
                if component.contains(':') {
                    return refuse(format!(
                        "the path '{path}' names a tag (':'); the mirror's engine images get the engine's own tags"
                    ));
                }
                if !is_path_component(component) {
                    return refuse(format!(
                        "the path component '{component}' is not a repository name (lowercase letters and digits, separated by '.', '_', '__' or '-')"
                    ));
                }
            }
        }
        Ok(Self(trimmed.to_string()))
    }

    /// The registry as given (without a trailing `/`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The mirror's copy of an engine's official image at `version`.
    pub fn default_image(&self, engine: EngineKind, version: &str) -> String {
        let registry = &self.0;
        match engine {
            EngineKind::Redis => format!("{registry}/library/redis:{version}"),
            EngineKind::Valkey => format!("{registry}/valkey/valkey:{version}"),
            EngineKind::Dragonfly => format!("{registry}/dragonflydb/dragonfly:v{version}"),
        }
    }

    /// The mirror's engine repositories, as `allowedImages` patterns (every tag of each).
    pub fn allowed_patterns(&self) -> Vec<String> {
        ["library/redis", "valkey/valkey", "dragonflydb/dragonfly"]
            .iter()
            .map(|repository| format!("{}/{repository}", self.0))
            .collect()
    }
}

/// A repository path component as the OCI distribution spec has it.
fn is_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if alnum(c) {
            i += 1;
            continue;
        }
        // A separator: '.', '_', '__' or a run of '-', between alphanumerics.
        let run = bytes[i..].iter().take_while(|&&b| !alnum(b)).count();
        let separator = &component[i..i + run];
        let ok = matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
        i += run;
    }
    true
}

/// The image an engine entry runs: its own `image`, else its official image from the mirror
/// when one is set, else the official image itself.
pub fn engine_image(engine: &EngineSpec, registry: Option<&EngineRegistry>) -> String {
    match (&engine.image, registry) {
        (Some(image), _) => image.clone(),
        (None, Some(registry)) => registry.default_image(engine.engine, &engine.version),
        (None, None) => engine.engine.default_image(&engine.version),
    }
}

/// The mirror an entry's image came from: set when the entry names no image of its own.
pub fn image_registry<'a>(
    engine: &EngineSpec,
    registry: Option<&'a EngineRegistry>,
) -> Option<&'a EngineRegistry> {
    registry.filter(|_| engine.image.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_holds_every_engine_under_its_docker_hub_name() {
        let mirror = EngineRegistry::parse("mirror.example.com:5000/hub").unwrap();
        assert_eq!(
            mirror.default_image(EngineKind::Redis, "8.2.3"),
            "mirror.example.com:5000/hub/library/redis:8.2.3"
        );
        assert_eq!(
            mirror.default_image(EngineKind::Valkey, "9.1.2"),
            "mirror.example.com:5000/hub/valkey/valkey:9.1.2"
        );
        assert_eq!(
            mirror.default_image(EngineKind::Dragonfly, "1.40.0"),
            "mirror.example.com:5000/hub/dragonflydb/dragonfly:v1.40.0"
        );
        assert_eq!(
            mirror.allowed_patterns(),
            [
                "mirror.example.com:5000/hub/library/redis",
                "mirror.example.com:5000/hub/valkey/valkey",
                "mirror.example.com:5000/hub/dragonflydb/dragonfly"
            ]
        );
    }

    #[test]
    fn an_entry_with_its_own_image_keeps_it_and_the_others_take_the_mirror() {
        let mirror = EngineRegistry::parse("localhost:5000").unwrap();
        let mut own = EngineSpec::new(EngineKind::Valkey, "9.1.2");
        own.image = Some("registry.example.com/team/valkey:custom".into());
        assert_eq!(
            engine_image(&own, Some(&mirror)),
            "registry.example.com/team/valkey:custom"
        );
        assert_eq!(image_registry(&own, Some(&mirror)), None);
        let official = EngineSpec::new(EngineKind::Redis, "8.2.3");
        assert_eq!(
            engine_image(&official, Some(&mirror)),
            "localhost:5000/library/redis:8.2.3"
        );
        assert_eq!(image_registry(&official, Some(&mirror)), Some(&mirror));
        assert_eq!(engine_image(&official, None), "redis:8.2.3");
    }

    #[test]
    fn registry_hosts_with_ports_and_paths_are_taken() {
        for good in [
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com/docker-hub",
            "mirror.example.com",
            "mirror.example.com:5000",
            "localhost:5000/a/b_c/d-e",
            "localhost",
            "10.0.0.7:5000",
            "artifactory.example.com/docker-remote/",
        ] {
            assert!(EngineRegistry::parse(good).is_ok(), "{good}");
        }
        assert_eq!(
            EngineRegistry::parse("mirror.example.com/hub/")
                .unwrap()
                .as_str(),
            "mirror.example.com/hub"
        );
    }

    #[test]
    fn what_is_not_a_registry_host_is_refused_saying_why() {
        for (bad, why) in [
            ("https://mirror.example.com", "scheme (https://)"),
            ("mirror.example.com /hub", "spaces"),
            ("mirror.example.com/redis:7.4", "names a tag"),
            ("mirror.example.com:latest", "the port 'latest'"),
            ("Mirror.Example.com", "uppercase"),
            ("mirror", "Docker Hub repository"),
            ("mirror.example.com/Hub", "'Hub' is not a repository name"),
            ("mirror.example.com/redis@sha256:abc", "digest"),
            ("", "empty"),
            ("mirror..example.com", "not a DNS name"),
        ] {
            let err = EngineRegistry::parse(bad).unwrap_err();
            assert!(
                err.contains(why)
                    && err.contains("engineRegistry")
                    && err.contains("HOST[:PORT][/PATH]"),
                "{bad}: {err}"
            );
        }
    }
}
