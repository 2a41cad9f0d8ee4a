//! Container images to local programs: the node agent's stand-in for pulling an image.
//!
//! There is no container runtime here, so an image is "pulled" by finding the local program it
//! would have run, of the version its tag names: `redis:<v>` is the local `redis-server` reporting
//! `<v>`, `valkey/valkey:<v>` the local `valkey-server`, the dragonfly image the local
//! `dragonfly`, and the membench image the freshly built `membench`. An image with no local
//! program is a pull failure whose message says which image and why.
//!
//! The image's entrypoint is reproduced too, because a pod's `command` and `args` only mean
//! something relative to it (Kubernetes: `command` replaces the entrypoint, `args` the image's
//! default arguments).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Redis,
    Valkey,
    Dragonfly,
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

    /// Programs the image ships besides its server, which a pod's `command` may name.
    fn tools(self) -> &'static [&'static str] {
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

/// True when a program reporting `actual` satisfies an image tag naming `wanted`: the same
/// version, or `wanted` is a prefix of whole components (`7.0` accepts `7.0.15`, as the floating
/// tag `redis:7.0` would pull the newest 7.0.x).
pub fn version_matches(wanted: &str, actual: &str) -> bool {
    let wanted: Vec<&str> = wanted.split('.').collect();
    let actual: Vec<&str> = actual.split('.').collect();
    wanted.len() <= actual.len() && wanted.iter().zip(&actual).all(|(w, a)| w == a)
}

/// The version a server program prints for `--version`: `v=7.0.15` (Redis, Valkey) or a
/// `v1.34.1`-style word (Dragonfly).
pub fn parse_version_output(output: &str) -> Option<String> {
    for word in output.split_whitespace() {
        let candidate = word
            .strip_prefix("v=")
            .or_else(|| word.strip_prefix('v'))
            .unwrap_or(word);
        let candidate = candidate.split('-').next().unwrap_or("");
        if candidate.contains('.')
            && candidate
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
            return Some(candidate.to_string());
        }
    }
    None
}

/// Why an image could not be "pulled", worded for the pod status message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PullError(pub String);

/// Why a container's command could not be started (the kubelet's `StartError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StartError(pub String);

/// An image "pulled": which kind it is and the local server program standing in for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PulledImage {
    pub kind: ImageKind,
    /// The program the image's entrypoint runs by default.
    pub entrypoint: PathBuf,
    /// What `status.containerStatuses[].imageID` reports: `local://<path>@<version>`.
    pub image_id: String,
}

/// What to execute for a container: the program, its arguments, and whether it is the engine
/// server (which the agent binds to the pod's address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub is_engine_server: bool,
}

/// Finds local programs for images: searches extra directories first, then PATH, and asks each
/// candidate server for its version (cached by path and modification time).
pub struct ImageResolver {
    search_dirs: Vec<PathBuf>,
    membench_bin: Option<PathBuf>,
    repo_root: Option<PathBuf>,
    versions: Mutex<HashMap<PathBuf, (SystemTime, Option<String>)>>,
}

impl ImageResolver {
    /// `extra_dirs` are searched before PATH; `membench_bin` overrides where the membench image's
    /// binary is found, else the newest of `<repo_root>/target/{release,debug}/membench`.
    pub fn new(
        extra_dirs: Vec<PathBuf>,
        membench_bin: Option<PathBuf>,
        repo_root: Option<PathBuf>,
    ) -> Self {
        let mut search_dirs = extra_dirs;
        if let Some(path) = std::env::var_os("PATH") {
            search_dirs.extend(std::env::split_paths(&path));
        }
        ImageResolver {
            search_dirs,
            membench_bin,
            repo_root,
            versions: Mutex::new(HashMap::new()),
        }
    }

    /// Every executable called `name` in the search directories, in search order.
    fn candidates(&self, name: &str) -> Vec<PathBuf> {
        // Deduplicated by their real path (/bin and /usr/bin are often the same), but returned
        // as found: multi-call programs look at the name they are run by.
        let mut seen: Vec<PathBuf> = Vec::new();
        let mut found: Vec<PathBuf> = Vec::new();
        for dir in &self.search_dirs {
            let path = dir.join(name);
            if is_executable(&path) {
                let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
                if !seen.contains(&canonical) {
                    seen.push(canonical);
                    found.push(path);
                }
            }
        }
        found
    }

    /// Looks a program name up the way a shell would (a path is taken as is).
    pub fn find_program(&self, name: &str) -> Option<PathBuf> {
        if name.contains('/') {
            let path = PathBuf::from(name);
            return is_executable(&path).then_some(path);
        }
        self.candidates(name).into_iter().next()
    }

    /// The version a server program reports, cached until the file changes.
    fn program_version(&self, program: &Path) -> Option<String> {
        let modified = std::fs::metadata(program).and_then(|m| m.modified()).ok()?;
        if let Some((at, version)) = self.versions.lock().unwrap().get(program)
            && *at == modified
        {
            return version.clone();
        }
        let version = std::process::Command::new(program)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .output()
            .ok()
            .and_then(|out| {
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                parse_version_output(&text)
            });
        self.versions
            .lock()
            .unwrap()
            .insert(program.to_path_buf(), (modified, version.clone()));
        version
    }

    /// The membench binary: the configured one, or the newest build in the repository.
    fn membench_binary(&self) -> Option<PathBuf> {
        if let Some(bin) = &self.membench_bin {
            return is_executable(bin).then(|| bin.clone());
        }
        let root = self.repo_root.as_ref()?;
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        ["release", "debug"]
            .iter()
            .map(|profile| target.join(profile).join("membench"))
            .filter(|p| is_executable(p))
            .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
    }

    /// "Pulls" an image: finds the local program standing in for it.
    pub fn pull(&self, image: &str) -> Result<PulledImage, PullError> {
        let reference = ImageRef::parse(image);
        let Some(kind) = ImageKind::of(&reference) else {
            return Err(PullError(format!(
                "image {image:?} has no local program on this dev cluster node (it runs only \
                 redis:<version>, valkey/valkey:<version>, the dragonfly image and the membench \
                 image as local processes)"
            )));
        };
        if kind == ImageKind::Membench {
            let bin = self.membench_binary().ok_or_else(|| {
                PullError(format!(
                    "image {image:?}: no membench binary built; run `cargo build -p membench` or \
                     set MEMBENCH_BIN"
                ))
            })?;
            let modified = std::fs::metadata(&bin)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map(|d| d.as_secs())
                .unwrap_or(0);
            return Ok(PulledImage {
                kind,
                image_id: format!("local://{}@built-{modified}", bin.display()),
                entrypoint: bin,
            });
        }
        let server = kind.server_program().expect("engine images have a server");
        if reference.digest.is_some() && reference.tag.is_none() {
            return Err(PullError(format!(
                "image {image:?}: a digest cannot be matched to a local {server}; use a version tag"
            )));
        }
        let tag = reference.tag.as_deref().unwrap_or("latest");
        let candidates = self.candidates(server);
        let found: Vec<(PathBuf, Option<String>)> = candidates
            .into_iter()
            .map(|p| {
                let v = self.program_version(&p);
                (p, v)
            })
            .collect();
        let describe_found = || {
            if found.is_empty() {
                format!("no {server} on this machine")
            } else {
                let list: Vec<String> = found
                    .iter()
                    .map(|(p, v)| {
                        format!(
                            "{} is {}",
                            p.display(),
                            v.as_deref().unwrap_or("of unknown version")
                        )
                    })
                    .collect();
                list.join(", ")
            }
        };
        let Some(wanted) = kind.tag_version(tag) else {
            return Err(PullError(format!(
                "image {image:?}: tag {tag:?} is not a version, so no local {server} can stand in \
                 for it; pin a version ({})",
                describe_found()
            )));
        };
        for (path, version) in &found {
            if let Some(version) = version
                && version_matches(&wanted, version)
            {
                return Ok(PulledImage {
                    kind,
                    image_id: format!("local://{}@{version}", path.display()),
                    entrypoint: path.clone(),
                });
            }
        }
        Err(PullError(format!(
            "image {image:?}: no local {server} of version {wanted} ({})",
            describe_found()
        )))
    }

    /// What a container runs, given the pulled image and the pod's `command` and `args`, the way
    /// the image's entrypoint would interpret them.
    pub fn container_command(
        &self,
        image: &PulledImage,
        command: &[String],
        args: &[String],
    ) -> Result<ContainerCommand, StartError> {
        let server_name = image.kind.server_program();
        // `command` replaces the image's entrypoint; otherwise the entrypoint decides what the
        // first argument means.
        let argv: Vec<String> = if !command.is_empty() {
            command.iter().chain(args).cloned().collect()
        } else {
            match image.kind {
                ImageKind::Membench => {
                    let mut argv = vec![image.entrypoint.display().to_string()];
                    argv.extend(args.iter().cloned());
                    argv
                }
                ImageKind::Redis | ImageKind::Valkey | ImageKind::Dragonfly => {
                    let server = server_name.expect("engine images have a server");
                    // The engine images' docker-entrypoint.sh: no arguments runs the server with
                    // the image's default CMD; a first argument that is an option (or, for
                    // Redis/Valkey, a config file) goes to the server; anything else is a
                    // program to run.
                    let to_server = match args.first() {
                        None => true,
                        Some(first) => {
                            first.starts_with('-')
                                || (image.kind != ImageKind::Dragonfly && first.ends_with(".conf"))
                        }
                    };
                    if args.is_empty() && image.kind == ImageKind::Dragonfly {
                        vec![server.to_string(), "--logtostderr".to_string()]
                    } else if to_server {
                        std::iter::once(server.to_string())
                            .chain(args.iter().cloned())
                            .collect()
                    } else {
                        args.to_vec()
                    }
                }
            }
        };
        let (first, rest) = argv.split_first().expect("argv has a program");
        let base = first.rsplit('/').next().unwrap_or(first);
        let (program, is_engine_server) = if Some(base) == server_name {
            (image.entrypoint.clone(), true)
        } else if image.kind == ImageKind::Membench
            && (base == "membench" || *first == image.entrypoint.display().to_string())
        {
            (image.entrypoint.clone(), false)
        } else if image.kind.tools().contains(&base) {
            // Tools of the image (redis-cli, ...): the one installed next to its server first.
            let sibling = image.entrypoint.with_file_name(base);
            let program = if is_executable(&sibling) {
                sibling
            } else {
                self.find_program(base).ok_or_else(|| {
                    StartError(format!(
                        "exec: {base:?}: executable file not found on this machine"
                    ))
                })?
            };
            (program, false)
        } else {
            // Anything else (sh, sleep, ...) runs from this machine, as the image's own copy
            // would have.
            let program = self.find_program(first).ok_or_else(|| {
                StartError(format!(
                    "exec: {first:?}: executable file not found in $PATH"
                ))
            })?;
            (program, false)
        };
        Ok(ContainerCommand {
            program,
            args: rest.to_vec(),
            is_engine_server,
        })
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
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

    #[test]
    fn shorter_tags_accept_any_patch_release() {
        assert!(version_matches("7.0.15", "7.0.15"));
        assert!(version_matches("7.0", "7.0.15"));
        assert!(version_matches("7", "7.0.15"));
        assert!(!version_matches("7.0.1", "7.0.15"));
        assert!(!version_matches("7.2", "7.0.15"));
    }

    #[test]
    fn versions_are_read_from_server_banners() {
        assert_eq!(
            parse_version_output(
                "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64"
            )
            .as_deref(),
            Some("7.0.15")
        );
        assert_eq!(
            parse_version_output("Valkey server v=9.1.2 sha=0 malloc=libc bits=64").as_deref(),
            Some("9.1.2")
        );
        assert_eq!(
            parse_version_output("dragonfly v1.34.1-2c9a8b1e\nbuild time: ...").as_deref(),
            Some("1.34.1")
        );
    }

    fn pulled(kind: ImageKind, entrypoint: &str) -> PulledImage {
        PulledImage {
            kind,
            entrypoint: PathBuf::from(entrypoint),
            image_id: String::new(),
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn engine_args_without_command_go_to_the_server() {
        let resolver = ImageResolver::new(vec![], None, None);
        let image = pulled(ImageKind::Redis, "/usr/bin/redis-server");
        let cmd = resolver
            .container_command(&image, &[], &strings(&["--port", "6379", "--save", ""]))
            .unwrap();
        assert_eq!(cmd.program, PathBuf::from("/usr/bin/redis-server"));
        assert_eq!(cmd.args, strings(&["--port", "6379", "--save", ""]));
        assert!(cmd.is_engine_server);
    }

    #[test]
    fn command_naming_the_server_runs_the_local_server() {
        let resolver = ImageResolver::new(vec![], None, None);
        let image = pulled(ImageKind::Valkey, "/opt/valkey/valkey-server");
        let cmd = resolver
            .container_command(
                &image,
                &strings(&["valkey-server"]),
                &strings(&["--port", "7000"]),
            )
            .unwrap();
        assert_eq!(cmd.program, PathBuf::from("/opt/valkey/valkey-server"));
        assert_eq!(cmd.args, strings(&["--port", "7000"]));
        assert!(cmd.is_engine_server);
    }

    #[test]
    fn membench_image_entrypoint_is_membench() {
        let resolver = ImageResolver::new(vec![], None, None);
        let image = pulled(ImageKind::Membench, "/repo/target/debug/membench");
        let cmd = resolver
            .container_command(&image, &[], &strings(&["run", "--help"]))
            .unwrap();
        assert_eq!(cmd.program, PathBuf::from("/repo/target/debug/membench"));
        assert_eq!(cmd.args, strings(&["run", "--help"]));
        assert!(!cmd.is_engine_server);
    }

    #[test]
    fn other_commands_run_from_this_machine_or_fail_to_start() {
        let resolver = ImageResolver::new(vec![], None, None);
        let image = pulled(ImageKind::Redis, "/usr/bin/redis-server");
        let cmd = resolver
            .container_command(&image, &strings(&["sh", "-c", "exit 0"]), &[])
            .unwrap();
        assert!(cmd.program.ends_with("sh"));
        assert!(!cmd.is_engine_server);
        let err = resolver
            .container_command(&image, &strings(&["no-such-program-here"]), &[])
            .unwrap_err();
        assert!(err.0.contains("no-such-program-here"), "{err}");
    }

    #[test]
    fn unknown_images_fail_to_pull_with_the_image_named() {
        let resolver = ImageResolver::new(vec![], None, None);
        let err = resolver.pull("nginx:1.27").unwrap_err();
        assert!(err.0.contains("nginx:1.27"), "{err}");
    }
}
