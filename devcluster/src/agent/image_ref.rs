//! Image references as a kubelet reads them (`redis:7` is `docker.io/library/redis:7`), and
//! which of the images the node agent knows how to run a reference names.

/// A parsed image reference, normalised as Docker does (`redis:7` is
/// `docker.io/library/redis:7`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry host, e.g. `docker.io` or `ghcr.io`.
    pub registry: String,
    /// Repository path within the registry, e.g. `library/redis` or `valkey/valkey`.
    pub repository: String,
    /// The tag; `latest` when the reference names neither tag nor digest.
    pub tag: Option<String>,
    /// The digest, e.g. `sha256:...`, when the reference pins one.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses `[registry/]repository[:tag][@digest]` the way Docker does: the first path
    /// component is a registry only if it contains a `.` or `:` or is `localhost`.
    pub fn parse(image: &str) -> ImageRef {
        let (rest, digest) = match image.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest.to_string())),
            None => (image, None),
        };
        // A tag is after the last ':' only if that ':' follows the last '/' (else it is a port).
        let (name, tag) = match rest.rfind(':') {
            Some(i) if !rest[i..].contains('/') => (&rest[..i], Some(rest[i + 1..].to_string())),
            _ => (rest, None),
        };
        let (registry, repository) = match name.split_once('/') {
            Some((first, path))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), path.to_string())
            }
            _ => ("docker.io".to_string(), name.to_string()),
        };
        let repository = if registry == "docker.io" && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        let tag = match (tag, &digest) {
            (None, None) => Some("latest".to_string()),
            (tag, _) => tag,
        };
        ImageRef {
            registry,
            repository,
            tag,
            digest,
        }
    }
}

/// The images the node agent knows how to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ImageKind {
    Redis,
    Valkey,
    Dragonfly,
    #[default]
    Membench,
}

impl ImageKind {
    /// Which known image a reference names, if any.
    pub fn of(image: &ImageRef) -> Option<ImageKind> {
        let full = format!("{}/{}", image.registry, image.repository);
        match full.as_str() {
            "docker.io/library/redis" => Some(ImageKind::Redis),
            "docker.io/valkey/valkey" => Some(ImageKind::Valkey),
            "docker.dragonflydb.io/dragonflydb/dragonfly"
            | "ghcr.io/dragonflydb/dragonfly"
            | "docker.io/dragonflydb/dragonfly" => Some(ImageKind::Dragonfly),
            _ if image.repository.rsplit('/').next() == Some("membench") => {
                Some(ImageKind::Membench)
            }
            _ => None,
        }
    }

    /// The server program of an engine image (the one the agent binds to the pod address).
    pub fn server_program(self) -> Option<&'static str> {
        match self {
            ImageKind::Redis => Some("redis-server"),
            ImageKind::Valkey => Some("valkey-server"),
            ImageKind::Dragonfly => Some("dragonfly"),
            ImageKind::Membench => None,
        }
    }

    /// The engine store's name of an engine image's engine.
    pub(super) fn store_engine(self) -> Option<&'static str> {
        match self {
            ImageKind::Redis => Some("redis"),
            ImageKind::Valkey => Some("valkey"),
            ImageKind::Dragonfly => Some("dragonfly"),
            ImageKind::Membench => None,
        }
    }

    /// Programs the image ships besides its server, which a pod's `command` may name.
    pub(super) fn tools(self) -> &'static [&'static str] {
        match self {
            ImageKind::Redis => &[
                "redis-cli",
                "redis-benchmark",
                "redis-check-aof",
                "redis-check-rdb",
                "redis-sentinel",
            ],
            ImageKind::Valkey => &[
                "valkey-cli",
                "valkey-benchmark",
                "valkey-check-aof",
                "valkey-check-rdb",
                "valkey-sentinel",
            ],
            ImageKind::Dragonfly | ImageKind::Membench => &[],
        }
    }

    /// The version an engine image's tag names: `7.0.15` from `7.0.15` or `7.0.15-alpine`,
    /// `1.34.1` from dragonfly's `v1.34.1`. None for a tag that is not a version (`latest`).
    pub fn tag_version(self, tag: &str) -> Option<String> {
        let tag = match self {
            ImageKind::Dragonfly => tag.strip_prefix('v').unwrap_or(tag),
            _ => tag,
        };
        let version = tag.split('-').next().unwrap_or("");
        let valid = !version.is_empty()
            && version
                .split('.')
                .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
        valid.then(|| version.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_normalise_to_docker_hub_library() {
        let r = ImageRef::parse("redis:7.0.15");
        assert_eq!(r.registry, "docker.io");
        assert_eq!(r.repository, "library/redis");
        assert_eq!(r.tag.as_deref(), Some("7.0.15"));
        assert_eq!(ImageKind::of(&r), Some(ImageKind::Redis));
        assert_eq!(
            ImageKind::of(&ImageRef::parse("docker.io/library/redis:7")),
            Some(ImageKind::Redis)
        );
    }

    #[test]
    fn registry_ports_are_not_tags() {
        let r = ImageRef::parse("localhost:5000/membench");
        assert_eq!(r.registry, "localhost:5000");
        assert_eq!(r.repository, "membench");
        assert_eq!(r.tag.as_deref(), Some("latest"));
        assert_eq!(ImageKind::of(&r), Some(ImageKind::Membench));
    }

    #[test]
    fn known_images_are_classified() {
        let kind = |s: &str| ImageKind::of(&ImageRef::parse(s));
        assert_eq!(kind("valkey/valkey:9.1.2"), Some(ImageKind::Valkey));
        assert_eq!(
            kind("docker.dragonflydb.io/dragonflydb/dragonfly:v1.34.1"),
            Some(ImageKind::Dragonfly)
        );
        assert_eq!(
            kind("ghcr.io/membench/membench:dev"),
            Some(ImageKind::Membench)
        );
        assert_eq!(kind("membench"), Some(ImageKind::Membench));
        assert_eq!(kind("nginx:1.27"), None);
        assert_eq!(kind("bitnami/redis:7.0.15"), None);
    }

    #[test]
    fn tags_name_versions() {
        assert_eq!(
            ImageKind::Redis.tag_version("7.0.15-alpine").as_deref(),
            Some("7.0.15")
        );
        assert_eq!(
            ImageKind::Dragonfly.tag_version("v1.34.1").as_deref(),
            Some("1.34.1")
        );
        assert_eq!(ImageKind::Redis.tag_version("latest"), None);
        assert_eq!(ImageKind::Redis.tag_version("alpine"), None);
    }
}
