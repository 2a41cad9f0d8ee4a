//! The membench image as `hack/build-image.sh` writes it without a container runtime
//! (`target/image/membench-oci.tar`: an OCI archive holding an image index for linux/amd64 and
//! linux/arm64), read with skopeo as a registry client reads it, unpacked, and run: the amd64
//! root file system under chroot as user 65532, the arm64 one under chroot with qemu-user inside
//! it, so that only the image's own loader and libraries can serve the binary. Also the
//! Dockerfile, which users build with buildx, against the same layout.
//!
//! `hack/test.sh` builds the image before the tests; a missing image or tool fails the test with
//! the command to run. Running the image's root file systems needs root (chroot), as CI has.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

const BUILD_IMAGE: &str = "hack/install-cross.sh && hack/build-image.sh";
const ENTRYPOINT: &str = "/usr/local/bin/membench";
const USER: &str = "65532:65532";

/// The workspace's target directory, found from the membench binary this test was built with.
fn target_dir() -> PathBuf {
    let membench = PathBuf::from(env!("CARGO_BIN_EXE_membench"));
    membench
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf()
}

fn archive() -> PathBuf {
    let archive = target_dir().join("image/membench-oci.tar");
    assert!(
        archive.is_file(),
        "no image at {}: run `{BUILD_IMAGE}`",
        archive.display()
    );
    archive
}

fn program_on_path(name: &str, install: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
        })
        .unwrap_or_else(|| panic!("{name} is not on PATH: run {install}"))
}

fn skopeo() -> PathBuf {
    program_on_path("skopeo", "hack/install-cross.sh (Debian's skopeo)")
}

fn run(command: &mut Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?} does not start: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn oci_archive_reference() -> String {
    format!("oci-archive:{}", archive().display())
}

/// `skopeo inspect ARGS oci-archive:…` as JSON.
fn skopeo_inspect(args: &[&str]) -> Value {
    let output = run(Command::new(skopeo())
        .arg("inspect")
        .args(args)
        .arg(oci_archive_reference()));
    serde_json::from_slice(&output.stdout).expect("skopeo prints JSON")
}

/// The image for one platform copied out of the archive by skopeo (which checks every digest)
/// and its layers unpacked into `destination`.
fn unpack(arch: &str, destination: &Path) {
    let blobs = destination.with_extension("blobs");
    for dir in [destination, blobs.as_path()] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }
    std::fs::create_dir_all(destination).unwrap();
    run(Command::new(skopeo())
        .args([
            "copy",
            "--quiet",
            "--override-os",
            "linux",
            "--override-arch",
            arch,
        ])
        .arg(oci_archive_reference())
        .arg(format!("dir:{}", blobs.display())));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(blobs.join("manifest.json")).unwrap()).unwrap();
    for layer in manifest["layers"].as_array().unwrap() {
        assert_eq!(
            layer["mediaType"], "application/vnd.oci.image.layer.v1.tar+gzip",
            "unexpected layer type"
        );
        let digest = layer["digest"].as_str().unwrap();
        let blob = blobs.join(digest.strip_prefix("sha256:").unwrap());
        run(Command::new("tar")
            .args([
                "--extract",
                "--gzip",
                "--same-permissions",
                "--numeric-owner",
            ])
            .arg("--file")
            .arg(&blob)
            .arg("--directory")
            .arg(destination));
    }
    std::fs::remove_dir_all(&blobs).unwrap();
}

/// Each platform's root file system, unpacked once per test run and only read afterwards.
fn rootfs(arch: &'static str) -> &'static Path {
    static AMD64: OnceLock<PathBuf> = OnceLock::new();
    static ARM64: OnceLock<PathBuf> = OnceLock::new();
    let cell = match arch {
        "amd64" => &AMD64,
        "arm64" => &ARM64,
        other => panic!("the image has no {other} platform"),
    };
    cell.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("image-rootfs-{arch}"));
        unpack(arch, &dir);
        dir
    })
}

/// Every path in a root file system, relative to it, with its metadata (links not followed).
fn walk(root: &Path) -> Vec<(PathBuf, std::fs::Metadata)> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let metadata = std::fs::symlink_metadata(entry.path()).unwrap();
            if metadata.is_dir() {
                pending.push(entry.path());
            }
            let relative = entry.path().strip_prefix(root).unwrap().to_path_buf();
            found.push((relative, metadata));
        }
    }
    found
}

/// `e_machine` of an ELF file: 62 for x86-64, 183 for AArch64.
fn elf_machine(path: &Path) -> u16 {
    let header = std::fs::read(path).unwrap();
    assert_eq!(
        &header[..4],
        b"\x7fELF",
        "{} is not an ELF file",
        path.display()
    );
    u16::from_le_bytes([header[18], header[19]])
}

fn expected_version() -> String {
    format!("membench {}\n", env!("CARGO_PKG_VERSION"))
}

#[test]
fn image_index_lists_linux_amd64_and_linux_arm64() {
    let index = skopeo_inspect(&["--raw"]);
    assert_eq!(
        index["mediaType"], "application/vnd.oci.image.index.v1+json",
        "the archive's image is not an image index: {index}"
    );
    let platforms: BTreeSet<(String, String)> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            assert_eq!(m["mediaType"], "application/vnd.oci.image.manifest.v1+json");
            let platform = &m["platform"];
            (
                platform["os"].as_str().unwrap().to_string(),
                platform["architecture"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: BTreeSet<(String, String)> = [("linux", "amd64"), ("linux", "arm64")]
        .into_iter()
        .map(|(os, arch)| (os.to_string(), arch.to_string()))
        .collect();
    assert_eq!(platforms, expected);
    assert_eq!(index["manifests"].as_array().unwrap().len(), 2);
}

#[test]
fn each_platform_config_has_the_membench_entrypoint_and_user_65532() {
    for arch in ["amd64", "arm64"] {
        let config = skopeo_inspect(&[
            "--config",
            "--override-os",
            "linux",
            "--override-arch",
            arch,
        ]);
        assert_eq!(config["architecture"], arch);
        assert_eq!(config["os"], "linux");
        assert_eq!(
            config["config"]["Entrypoint"],
            serde_json::json!([ENTRYPOINT]),
            "{arch}"
        );
        assert_eq!(config["config"]["User"], USER, "{arch}");
        assert!(
            config["config"]["Cmd"].is_null(),
            "{arch}: no default command"
        );
    }
}

#[test]
fn each_platform_holds_membench_built_for_that_platform() {
    for (arch, machine) in [("amd64", 62), ("arm64", 183)] {
        let membench = rootfs(arch).join(ENTRYPOINT.trim_start_matches('/'));
        assert_eq!(elf_machine(&membench), machine, "{arch} image's membench");
    }
}

#[test]
fn image_file_system_has_no_shell_and_no_program_but_membench_and_its_loader() {
    const SHELLS: [&str; 8] = ["sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "busybox"];
    for arch in ["amd64", "arm64"] {
        let root = rootfs(arch);
        let mut programs = BTreeSet::new();
        for (path, metadata) in walk(root) {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                !SHELLS.contains(&name.as_str()),
                "{arch} image has a shell at /{}",
                path.display()
            );
            let executable =
                std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o111 != 0;
            if metadata.is_file() && executable {
                programs.insert(format!("/{}", path.display()));
            }
        }
        let loader = match arch {
            "amd64" => "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
            _ => "/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
        };
        let expected: BTreeSet<String> = [ENTRYPOINT, loader].map(String::from).into();
        assert_eq!(programs, expected, "{arch} image's executable files");
        for dir in ["bin", "sbin", "usr/bin", "usr/sbin"] {
            assert!(!root.join(dir).exists(), "{arch} image has /{dir}");
        }
    }
}

/// `chroot --userspec=65532:65532 ROOT ARGS…`: the program runs as the image's user, with the
/// image's files as its whole world.
fn run_in_root(root: &Path, args: &[&str]) -> Output {
    let output = Command::new("chroot")
        .arg(format!("--userspec={USER}"))
        .arg(root)
        .args(args)
        .output()
        .expect("chroot starts");
    assert!(
        output.status.success(),
        "chroot {} {args:?} failed ({}; chroot needs root):\n{}",
        root.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn amd64_image_runs_membench_from_its_own_root_as_user_65532() {
    let output = run_in_root(rootfs("amd64"), &[ENTRYPOINT, "--version"]);
    assert_eq!(String::from_utf8_lossy(&output.stdout), expected_version());
}

#[test]
fn arm64_image_runs_membench_from_its_own_root_under_qemu() {
    let qemu = program_on_path(
        "qemu-aarch64-static",
        "hack/install-cross.sh (Debian's qemu-user-static)",
    );
    // A copy of the root with the static qemu inside it: qemu then finds the loader and the
    // libraries in the image or nowhere (given -L, it would fall back to this machine's own
    // arm64 libraries when the image lacked one).
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("image-rootfs-arm64-with-qemu");
    unpack("arm64", &root);
    std::fs::copy(&qemu, root.join("qemu-aarch64-static")).unwrap();
    let output = run_in_root(&root, &["/qemu-aarch64-static", ENTRYPOINT, "--version"]);
    assert_eq!(String::from_utf8_lossy(&output.stdout), expected_version());
    std::fs::remove_dir_all(&root).unwrap();
}

/// The instruction lines of the Dockerfile's last stage (after its last FROM), and of all of it.
fn dockerfile() -> (Vec<String>, Vec<String>) {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Dockerfile")).unwrap();
    // Join continuation lines, drop comments.
    let joined = text.replace("\\\n", " ");
    let lines: Vec<String> = joined
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let last_from = lines.iter().rposition(|l| l.starts_with("FROM ")).unwrap();
    (lines[last_from..].to_vec(), lines)
}

#[test]
fn dockerfile_lays_out_the_same_image_as_build_image() {
    let config = skopeo_inspect(&[
        "--config",
        "--override-os",
        "linux",
        "--override-arch",
        "amd64",
    ]);
    let (final_stage, all) = dockerfile();
    // The build stage lays the file system out with the script hack/build-image.sh uses...
    assert!(
        all.iter()
            .any(|l| l.contains("hack/image-rootfs.sh target/release/membench /rootfs")),
        "the Dockerfile does not run hack/image-rootfs.sh: {all:#?}"
    );
    // ...and the image is that file system and nothing else, with the same user and entrypoint.
    assert_eq!(final_stage[0], "FROM scratch");
    assert!(final_stage.contains(&"COPY --from=build /rootfs/ /".to_string()));
    let user = final_stage
        .iter()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("the Dockerfile's image sets USER");
    assert_eq!(user, config["config"]["User"].as_str().unwrap());
    let entrypoint: Value = serde_json::from_str(
        final_stage
            .iter()
            .find_map(|l| l.strip_prefix("ENTRYPOINT "))
            .expect("the Dockerfile's image sets ENTRYPOINT"),
    )
    .expect("ENTRYPOINT in exec (JSON) form");
    assert_eq!(entrypoint, config["config"]["Entrypoint"]);
    // The script must be in the build context.
    let dockerignore =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../.dockerignore")).unwrap();
    assert!(
        dockerignore
            .lines()
            .any(|l| l.trim() == "!hack/image-rootfs.sh"),
        ".dockerignore keeps hack/image-rootfs.sh out of the build context"
    );
}
