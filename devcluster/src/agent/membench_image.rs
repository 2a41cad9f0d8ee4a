//! The membench image on a fake node: what stands in for `ghcr.io/membench/membench:<tag>` (any
//! image whose repository ends in `membench`) on a node of a given architecture.
//!
//! In order:
//!   1. `MEMBENCH_BIN` (`--membench-bin`), on nodes of the architecture it is built for;
//!   2. the image itself, `target/image/membench-oci.tar` from `hack/build-image.sh`: the
//!      node's platform unpacked ([`super::oci_archive`]), its entrypoint and user taken from the
//!      image config;
//!   3. without the archive, the newest membench build for the node's architecture:
//!      `target/{release,debug}/membench` for this machine's, `target/<triple>/{release,debug}/
//!      membench` for the other.
//!
//! An archive older than membench's sources (a file of `operator/src/`, `enginestore/src/` or
//! the manifests changed after it was written) holds older code than the checkout: the
//! newest build for the node's architecture that is newer than the archive runs then, and the
//! `Pulled` event says that the archive was passed over and why; with no such build the archive
//! runs, and the event says it is older than the sources. So a stale image never runs silently.
//! A build that is merely newer than the archive does not make it stale (`cargo test` may relink
//! `target/debug/membench` with no change to the code): it holds the same code. An arm64 node on an x86 machine runs arm64 code
//! under qemu-user: the image's own root is qemu's `-L`, so the image's loader and libraries are
//! the ones used. A node whose architecture has neither an archive platform nor a build fails
//! the pull saying so, as a real node fails on a single-platform image.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use membench_enginestore::{HOST_ARCH, elf_arch, platform_arch, store_arch};

use super::images::{
    ImageKind, ImageResolver, PullError, PulledImage, is_executable, push_emulator,
};
use super::oci_archive;

/// The Rust target triple of builds for an architecture (store names).
fn target_triple(arch: &str) -> String {
    format!("{arch}-unknown-linux-gnu")
}

/// When a file last changed (the epoch when unknown).
fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

fn epoch_seconds(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The files membench is built from, relative to the repository: the crates' sources and
/// manifests (membench depends on the engine store crate) and the workspace's.
const SOURCE_DIRS: &[&str] = &["operator/src", "enginestore/src"];
const SOURCE_FILES: &[&str] = &[
    "Cargo.toml",
    "Cargo.lock",
    "operator/Cargo.toml",
    "enginestore/Cargo.toml",
];

/// The most recently changed file under `dir` (recursively), with its time.
fn newest_file_under(dir: &Path) -> Option<(PathBuf, SystemTime)> {
    let mut newest: Option<(PathBuf, SystemTime)> = None;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if newest.as_ref().is_none_or(|(_, t)| modified(&path) > *t) {
                newest = Some((path.clone(), modified(&path)));
            }
        }
    }
    newest
}

impl ImageResolver {
    /// membench's most recently changed source file and its time, when the repository is known.
    fn newest_source(&self) -> Option<(PathBuf, SystemTime)> {
        let root = self.repo_root.as_ref()?;
        SOURCE_DIRS
            .iter()
            .filter_map(|dir| newest_file_under(&root.join(dir)))
            .chain(
                SOURCE_FILES
                    .iter()
                    .map(|file| root.join(file))
                    .filter(|path| path.is_file())
                    .map(|path| {
                        let time = modified(&path);
                        (path, time)
                    }),
            )
            .max_by_key(|(_, time)| *time)
    }

    /// The membench builds for `arch` (store name) in the target directory, newest first.
    fn membench_builds(&self, arch: &str) -> Vec<PathBuf> {
        let Some(target) = self.target_dir.clone() else {
            return Vec::new();
        };
        let base = if arch == HOST_ARCH {
            target
        } else {
            target.join(target_triple(arch))
        };
        let mut builds: Vec<PathBuf> = ["release", "debug"]
            .iter()
            .map(|profile| base.join(profile).join("membench"))
            .filter(|p| is_executable(p))
            .collect();
        builds.sort_by_key(|p| std::cmp::Reverse(modified(p)));
        builds
    }

    /// What runs a program of `arch` here: nothing for this machine's, qemu-user for the other
    /// (with `root` as the root its loader and libraries come from).
    fn emulator_for(&self, image: &str, arch: &str, root: &Path) -> Result<Vec<String>, PullError> {
        if arch == HOST_ARCH {
            return Ok(Vec::new());
        }
        let name = format!("qemu-{arch}-static");
        let qemu = self.find_program(&name).ok_or_else(|| {
            PullError(format!(
                "image {image:?}: this {} node runs {} programs under qemu-user on this {HOST_ARCH} machine, and {name} is not installed (hack/install-cross.sh installs qemu-user-static)",
                platform_arch(arch),
                platform_arch(arch)
            ))
        })?;
        Ok(vec![
            qemu.display().to_string(),
            "-L".to_string(),
            root.display().to_string(),
        ])
    }

    /// "Pulls" the membench image for a node of `node_arch` (`amd64`, `arm64`).
    pub(super) fn pull_membench(
        &self,
        image: &str,
        node_arch: &str,
    ) -> Result<PulledImage, PullError> {
        let arch = store_arch(node_arch).ok_or_else(|| {
            PullError(format!(
                "image {image:?}: no membench for a node of architecture {node_arch:?}"
            ))
        })?;
        let platform = format!("linux/{}", platform_arch(arch));

        if let Some(bin) = &self.membench_bin
            && elf_arch(bin).unwrap_or(HOST_ARCH) == arch
        {
            if !is_executable(bin) {
                return Err(PullError(format!(
                    "image {image:?}: MEMBENCH_BIN={} is not an executable file",
                    bin.display()
                )));
            }
            return self.pulled_build(image, bin, arch, &platform, None);
        }

        let builds = self.membench_builds(arch);
        let archive = self.image_archive.as_ref().filter(|a| a.is_file());
        if let Some(archive) = archive {
            let archive_time = modified(archive);
            let changed_since = self
                .newest_source()
                .filter(|(_, time)| *time > archive_time);
            let Some((source, _)) = changed_since else {
                return self.pulled_archive(image, archive, arch, &platform, None);
            };
            let newer_build = builds.first().filter(|b| modified(b) > archive_time);
            return match newer_build {
                Some(build) => {
                    let note = format!(
                        "{} is older than {} (changed after it was built), so the newest build runs; run hack/build-image.sh to run the image",
                        archive.display(),
                        source.display()
                    );
                    self.pulled_build(image, build, arch, &platform, Some(note))
                }
                None => {
                    let note = format!(
                        "{} is older than {} (changed after it was built), and no membench build for {arch} is newer than it: the image runs as it is; run hack/build-image.sh",
                        archive.display(),
                        source.display()
                    );
                    self.pulled_archive(image, archive, arch, &platform, Some(note))
                }
            };
        }
        match builds.first() {
            Some(build) => self.pulled_build(image, build, arch, &platform, None),
            None => {
                let hint = if arch == HOST_ARCH {
                    "cargo build -p membench".to_string()
                } else {
                    format!(
                        "cargo build --release --target {} -p membench",
                        target_triple(arch)
                    )
                };
                Err(PullError(format!(
                    "image {image:?}: no membench for {platform}: neither the image archive {} (hack/build-image.sh) nor a membench build for {arch} ({hint}) is there",
                    self.image_archive.as_ref().map_or_else(
                        || "(none configured)".to_string(),
                        |a| a.display().to_string()
                    )
                )))
            }
        }
    }

    fn pulled_build(
        &self,
        image: &str,
        bin: &Path,
        arch: &str,
        platform: &str,
        note: Option<String>,
    ) -> Result<PulledImage, PullError> {
        // A build of the other architecture takes its libraries from this machine's multiarch
        // directories (hack/install-cross.sh installs Debian's arm64 libc).
        let wrapper = self.emulator_for(image, arch, Path::new("/"))?;
        let mut image_id = format!(
            "local://{}@built-{}?platform={platform}",
            bin.display(),
            epoch_seconds(modified(bin))
        );
        push_emulator(&mut image_id, &wrapper);
        Ok(PulledImage {
            kind: ImageKind::Membench,
            entrypoint: bin.to_path_buf(),
            wrapper,
            image_id,
            note,
            ..PulledImage::default()
        })
    }

    fn pulled_archive(
        &self,
        image: &str,
        archive: &Path,
        arch: &str,
        platform: &str,
        note: Option<String>,
    ) -> Result<PulledImage, PullError> {
        let unpacked = {
            // One unpacking at a time: two pods pulling the same platform share its copy.
            let _guard = self
                .unpack_lock
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            oci_archive::unpack(archive, platform_arch(arch), &self.image_cache)
                .map_err(|e| PullError(format!("image {image:?}: {e}")))?
        };
        let entrypoint = unpacked.config.entrypoint.first().ok_or_else(|| {
            PullError(format!(
                "image {image:?}: the {platform} config in {} has no entrypoint",
                archive.display()
            ))
        })?;
        let program = unpacked.root.join(entrypoint.trim_start_matches('/'));
        if !is_executable(&program) {
            return Err(PullError(format!(
                "image {image:?}: the entrypoint {entrypoint} is not an executable file in the {platform} image of {}",
                archive.display()
            )));
        }
        let wrapper = self.emulator_for(image, arch, &unpacked.root)?;
        let mut image_id = format!(
            "local://oci-archive:{}@{}?platform={platform}&manifest={}",
            archive.display(),
            unpacked.image_digest,
            unpacked.manifest_digest
        );
        push_emulator(&mut image_id, &wrapper);
        let env = unpacked
            .config
            .env
            .iter()
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Ok(PulledImage {
            kind: ImageKind::Membench,
            entrypoint: program,
            entrypoint_args: unpacked.config.entrypoint[1..].to_vec(),
            default_args: unpacked.config.cmd.clone(),
            wrapper,
            root: Some(unpacked.root.clone()),
            user: unpacked.config.user.clone(),
            env,
            image_id,
            note,
            ..PulledImage::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::oci_archive::write_test_archive;

    const IMAGE: &str = "ghcr.io/membench/membench:dev";

    /// A repository's target directory with membench builds, an image archive and a fake
    /// emulator, in a scratch directory.
    struct Repo(PathBuf);

    impl Repo {
        fn new(test: &str) -> Repo {
            let dir =
                std::env::temp_dir().join(format!("membench-image-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("bin")).unwrap();
            Repo(dir)
        }

        fn target(&self) -> PathBuf {
            self.0.join("target")
        }

        /// An executable file at `relative` (under target/), changed `seconds_ago`.
        fn build(&self, relative: &str, seconds_ago: u64) -> PathBuf {
            let path = self.target().join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            set_age(&path, seconds_ago);
            path
        }

        /// A source file of the repository, changed `seconds_ago`.
        fn source(&self, relative: &str, seconds_ago: u64) -> PathBuf {
            let path = self.0.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "").unwrap();
            set_age(&path, seconds_ago);
            path
        }

        fn archive(&self, platforms: &[&str], seconds_ago: u64) -> PathBuf {
            let dir = self.target().join("image");
            std::fs::create_dir_all(&dir).unwrap();
            let archive = write_test_archive(&dir, platforms);
            set_age(&archive, seconds_ago);
            archive
        }

        fn resolver(&self) -> ImageResolver {
            let mut resolver = ImageResolver::new(
                PathBuf::from("/nonexistent/store"),
                None,
                Some(self.0.clone()),
            )
            .with_image_archive(
                Some(self.target().join("image/membench-oci.tar")),
                self.0.join("cache"),
            );
            resolver.target_dir = Some(self.target());
            // A stand-in emulator for the other architecture, found on the agent's PATH.
            let other = if HOST_ARCH == "x86_64" {
                "aarch64"
            } else {
                "x86_64"
            };
            let qemu = self.0.join("bin").join(format!("qemu-{other}-static"));
            std::fs::write(&qemu, "").unwrap();
            std::fs::set_permissions(&qemu, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            resolver.search_dirs = vec![self.0.join("bin")];
            resolver
        }
    }

    impl Drop for Repo {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Makes the file's modification time `seconds_ago` before now.
    fn set_age(path: &Path, seconds_ago: u64) {
        let when = SystemTime::now() - std::time::Duration::from_secs(seconds_ago);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }

    fn native() -> &'static str {
        platform_arch(HOST_ARCH)
    }

    fn foreign() -> (&'static str, &'static str) {
        if HOST_ARCH == "x86_64" {
            ("arm64", "aarch64")
        } else {
            ("amd64", "x86_64")
        }
    }

    #[test]
    fn the_archive_runs_for_each_nodes_platform_with_its_entrypoint_and_user() {
        let repo = Repo::new("archive");
        repo.build("debug/membench", 600);
        repo.archive(&["amd64", "arm64"], 10);
        let resolver = repo.resolver();
        let pulled = resolver.pull(IMAGE, native()).unwrap();
        let root = pulled.root.clone().expect("runs from the unpacked image");
        assert_eq!(pulled.entrypoint, root.join("usr/local/bin/membench"));
        assert_eq!(pulled.user.as_deref(), Some("65532:65532"));
        assert!(pulled.wrapper.is_empty());
        assert!(
            pulled.image_id.starts_with("local://oci-archive:")
                && pulled
                    .image_id
                    .contains(&format!("?platform=linux/{}&manifest=sha256:", native())),
            "{}",
            pulled.image_id
        );
        let (foreign, foreign_arch) = foreign();
        let other = resolver.pull(IMAGE, foreign).unwrap();
        let other_root = other.root.clone().unwrap();
        assert_ne!(other_root, root);
        // Its own root is the emulator's: the image's loader and libraries run it.
        assert_eq!(
            other.wrapper[1..],
            ["-L".to_string(), other_root.display().to_string()]
        );
        assert!(other.wrapper[0].ends_with(&format!("qemu-{foreign_arch}-static")));
        assert!(
            other
                .image_id
                .ends_with(&format!("&emulator=qemu-{foreign_arch}-static")),
            "{}",
            other.image_id
        );
        let command = resolver
            .container_command(&other, &[], &["load".to_string()])
            .unwrap();
        assert_eq!(command.program, other.entrypoint);
        assert_eq!(command.args, ["load"]);
        assert_eq!(command.wrapper, other.wrapper);
        assert_eq!(command.image_root, Some(other_root));
    }

    #[test]
    fn a_build_relinked_after_the_archive_from_the_same_sources_leaves_the_image_running() {
        let repo = Repo::new("relinked");
        repo.source("operator/src/main.rs", 900);
        repo.archive(&["amd64", "arm64"], 600);
        // `cargo test` relinks target/debug/membench after the image was built: same code.
        repo.build("debug/membench", 10);
        let pulled = repo.resolver().pull(IMAGE, native()).unwrap();
        assert!(pulled.root.is_some(), "{pulled:?}");
        assert_eq!(pulled.note, None);
    }

    #[test]
    fn sources_changed_after_the_archive_make_the_newest_build_run_and_the_pull_says_why() {
        let repo = Repo::new("stale");
        repo.archive(&["amd64", "arm64"], 600);
        let changed = repo.source("enginestore/src/lib.rs", 300);
        let newer = repo.build("release/membench", 10);
        let pulled = repo.resolver().pull(IMAGE, native()).unwrap();
        assert_eq!(pulled.entrypoint, newer);
        assert_eq!(pulled.root, None);
        let note = pulled.note.unwrap();
        assert!(
            note.contains("membench-oci.tar is older than")
                && note.contains(&changed.display().to_string())
                && note.contains("hack/build-image.sh"),
            "{note}"
        );
        // With no build newer than the archive, the image still runs, and says it is stale.
        let (foreign, _) = foreign();
        let pulled = repo.resolver().pull(IMAGE, foreign).unwrap();
        assert!(pulled.root.is_some());
        assert!(
            pulled
                .note
                .as_deref()
                .is_some_and(|n| n.contains("the image runs as it is")),
            "{pulled:?}"
        );
    }

    #[test]
    fn an_archive_without_the_nodes_platform_fails_the_pull_even_with_a_build_there() {
        let repo = Repo::new("single-platform");
        let (foreign, foreign_arch) = foreign();
        repo.build(
            &format!("{foreign_arch}-unknown-linux-gnu/release/membench"),
            600,
        );
        repo.archive(&[native()], 10);
        let err = repo.resolver().pull(IMAGE, foreign).unwrap_err();
        assert!(
            err.0
                .contains(&format!("no matching manifest for linux/{foreign}")),
            "{err}"
        );
    }

    #[test]
    fn without_an_archive_the_build_for_the_nodes_architecture_runs_or_the_pull_says_how_to_make_one()
     {
        let repo = Repo::new("builds");
        let (foreign, foreign_arch) = foreign();
        let native_build = repo.build("debug/membench", 10);
        let resolver = repo.resolver();
        let pulled = resolver.pull(IMAGE, native()).unwrap();
        assert_eq!(pulled.entrypoint, native_build);
        let err = resolver.pull(IMAGE, foreign).unwrap_err();
        assert!(
            err.0.contains(&format!("no membench for linux/{foreign}"))
                && err.0.contains("hack/build-image.sh")
                && err.0.contains(&format!(
                    "cargo build --release --target {foreign_arch}-unknown-linux-gnu"
                )),
            "{err}"
        );
        let cross = repo.build(
            &format!("{foreign_arch}-unknown-linux-gnu/release/membench"),
            5,
        );
        let pulled = repo.resolver().pull(IMAGE, foreign).unwrap();
        assert_eq!(pulled.entrypoint, cross);
        // Its libraries come from this machine's multiarch directories.
        assert_eq!(pulled.wrapper[1..], ["-L".to_string(), "/".to_string()]);
    }
}
