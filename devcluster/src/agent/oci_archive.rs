//! The membench image as `hack/build-image.sh` writes it, an OCI archive (an OCI image layout in
//! a tar, `target/image/membench-oci.tar`), "pulled" the way a node's runtime pulls an image: the
//! index is read, the manifest of the node's platform chosen (as a node picks from a
//! multi-platform image; none is a pull failure, as for a single-platform image), every blob
//! checked against its digest, the layers unpacked in order into a root file system, and the
//! image config (entrypoint, user, environment) kept beside it.
//!
//! Unpacked images are cached by manifest digest under the agent's state directory, so each
//! platform of each archive is unpacked once. The archive is read with GNU tar and checked with
//! sha256sum, as the script that writes it does.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";

/// What the image config says about running the image (`config` in the OCI image config).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageConfig {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `User`: `uid`, `uid:gid`, or a name in the image's /etc/passwd.
    pub user: Option<String>,
    /// `Env`, as `NAME=value`.
    pub env: Vec<String>,
}

/// One platform of the archive's image, unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpackedImage {
    /// The digest a registry would name the image by: the image index's, or the manifest's for
    /// a single-platform archive.
    pub image_digest: String,
    /// The digest of the chosen platform's manifest.
    pub manifest_digest: String,
    /// `linux/amd64` or `linux/arm64`.
    pub platform: String,
    /// The unpacked root file system.
    pub root: PathBuf,
    pub config: ImageConfig,
}

/// Why an archive could not be pulled, worded for a pod's status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArchiveError(pub String);

/// Reads `archive` and unpacks its image for `arch` (`amd64` or `arm64`) under `cache`, or
/// returns the copy unpacked before.
pub fn unpack(archive: &Path, arch: &str, cache: &Path) -> Result<UnpackedImage, ArchiveError> {
    let platform = format!("linux/{arch}");
    let index: Value = parse(&read_member(archive, "index.json")?, "index.json")?;
    let top = index["manifests"]
        .as_array()
        .and_then(|m| m.first())
        .ok_or_else(|| ArchiveError(format!("{}: index.json names no image", archive.display())))?;
    let top_digest = string(top, "digest", "index.json")?;
    // build-image.sh's layout: index.json -> the image index blob -> one manifest per platform.
    // A single-platform layout names its manifest directly.
    let (image_digest, manifests) = if top["mediaType"] == INDEX_MEDIA_TYPE {
        let nested: Value = parse(&read_blob(archive, &top_digest)?, &top_digest)?;
        (top_digest, nested["manifests"].clone())
    } else {
        (top_digest, index["manifests"].clone())
    };
    let manifests = manifests.as_array().cloned().unwrap_or_default();
    let platform_of = |m: &Value| {
        let p = &m["platform"];
        format!(
            "{}/{}",
            p["os"].as_str().unwrap_or("linux"),
            p["architecture"].as_str().unwrap_or("?")
        )
    };
    let chosen = manifests
        .iter()
        .find(|m| platform_of(m) == platform)
        .ok_or_else(|| {
            let has: Vec<String> = manifests.iter().map(platform_of).collect();
            ArchiveError(format!(
                "no matching manifest for {platform} in {} (it has {})",
                archive.display(),
                if has.is_empty() {
                    "none".to_string()
                } else {
                    has.join(", ")
                }
            ))
        })?;
    let manifest_digest = string(chosen, "digest", &image_digest)?;
    let dir = cache.join(hex_of(&manifest_digest)?);
    let root = dir.join("rootfs");
    if dir.join("complete").is_file() {
        let config: Value = parse(
            &std::fs::read(dir.join("config.json")).map_err(io(&dir))?,
            "config.json",
        )?;
        return Ok(UnpackedImage {
            image_digest,
            manifest_digest,
            platform,
            root,
            config: image_config(&config),
        });
    }

    let manifest: Value = parse(&read_blob(archive, &manifest_digest)?, &manifest_digest)?;
    let config_digest = string(&manifest["config"], "digest", &manifest_digest)?;
    let config_bytes = read_blob(archive, &config_digest)?;
    let config: Value = parse(&config_bytes, &config_digest)?;
    let layers: Vec<String> = manifest["layers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| string(l, "digest", &manifest_digest))
        .collect::<Result<_, _>>()?;

    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(partial.join("rootfs")).map_err(io(&partial))?;
    let members: Vec<String> = layers
        .iter()
        .map(|d| blob_path(d))
        .collect::<Result<_, _>>()?;
    run(Command::new("tar")
        .arg("--extract")
        .arg("--file")
        .arg(archive)
        .arg("--directory")
        .arg(&partial)
        .arg("--no-anchored")
        .args(&members))?;
    for layer in &layers {
        let file = partial.join(blob_path(layer)?);
        check_digest(&file, layer)?;
        // Layers in order, each over the last (build-image.sh writes one, without whiteouts).
        run(Command::new("tar")
            .arg("--extract")
            .arg("--gzip")
            .arg("--file")
            .arg(&file)
            .arg("--directory")
            .arg(partial.join("rootfs"))
            .arg("--same-owner")
            .arg("--same-permissions"))?;
    }
    let _ = std::fs::remove_dir_all(partial.join("blobs"));
    std::fs::write(partial.join("config.json"), &config_bytes).map_err(io(&partial))?;
    std::fs::write(partial.join("complete"), "").map_err(io(&partial))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&partial, &dir).map_err(io(&dir))?;
    Ok(UnpackedImage {
        image_digest,
        manifest_digest,
        platform,
        root,
        config: image_config(&config),
    })
}

fn image_config(config: &Value) -> ImageConfig {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let c = &config["config"];
    ImageConfig {
        entrypoint: strings(&c["Entrypoint"]),
        cmd: strings(&c["Cmd"]),
        user: c["User"]
            .as_str()
            .filter(|u| !u.is_empty())
            .map(str::to_string),
        env: strings(&c["Env"]),
    }
}

/// A member of the archive, read whole (the small JSON files).
fn read_member(archive: &Path, member: &str) -> Result<Vec<u8>, ArchiveError> {
    let output = Command::new("tar")
        .arg("--extract")
        .arg("--to-stdout")
        .arg("--file")
        .arg(archive)
        // A member may be stored as `index.json` or `./index.json`, as the writer chose.
        .arg("--no-anchored")
        .arg(member)
        .output()
        .map_err(|e| ArchiveError(format!("cannot run tar: {e}")))?;
    if !output.status.success() {
        return Err(ArchiveError(format!(
            "cannot read {member} from {}: {}",
            archive.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(output.stdout)
}

/// A JSON blob of the archive, checked against its digest.
fn read_blob(archive: &Path, digest: &str) -> Result<Vec<u8>, ArchiveError> {
    let bytes = read_member(archive, &blob_path(digest)?)?;
    let output = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().expect("piped stdin").write_all(&bytes)?;
            child.wait_with_output()
        })
        .map_err(|e| ArchiveError(format!("cannot run sha256sum: {e}")))?;
    let actual = String::from_utf8_lossy(&output.stdout);
    if actual.split_whitespace().next() != Some(hex_of(digest)?) {
        return Err(ArchiveError(format!(
            "{} in {} does not match its digest: the archive is damaged; run hack/build-image.sh again",
            blob_path(digest)?,
            archive.display()
        )));
    }
    Ok(bytes)
}

fn check_digest(file: &Path, digest: &str) -> Result<(), ArchiveError> {
    let output = Command::new("sha256sum")
        .arg(file)
        .output()
        .map_err(|e| ArchiveError(format!("cannot run sha256sum: {e}")))?;
    let actual = String::from_utf8_lossy(&output.stdout);
    if actual.split_whitespace().next() != Some(hex_of(digest)?) {
        return Err(ArchiveError(format!(
            "layer {digest} does not match its digest: the archive is damaged; run hack/build-image.sh again"
        )));
    }
    Ok(())
}

fn blob_path(digest: &str) -> Result<String, ArchiveError> {
    Ok(format!("blobs/sha256/{}", hex_of(digest)?))
}

/// The hex part of a `sha256:` digest, refused unless it is one (it becomes a path).
fn hex_of(digest: &str) -> Result<&str, ArchiveError> {
    digest
        .strip_prefix("sha256:")
        .filter(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| ArchiveError(format!("{digest:?} is not a sha256 digest")))
}

fn string(value: &Value, field: &str, what: &str) -> Result<String, ArchiveError> {
    value[field]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| ArchiveError(format!("{what} has no {field}")))
}

fn parse(bytes: &[u8], what: &str) -> Result<Value, ArchiveError> {
    serde_json::from_slice(bytes).map_err(|e| ArchiveError(format!("{what} is not JSON: {e}")))
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> ArchiveError + '_ {
    move |e| ArchiveError(format!("{}: {e}", path.display()))
}

fn run(command: &mut Command) -> Result<(), ArchiveError> {
    let output = command
        .output()
        .map_err(|e| ArchiveError(format!("cannot run {command:?}: {e}")))?;
    if !output.status.success() {
        return Err(ArchiveError(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

/// Writes a small OCI archive as hack/build-image.sh lays it out (an index blob naming one
/// manifest per platform), with an executable script as each platform's entrypoint.
#[cfg(test)]
pub(super) fn write_test_archive(dir: &Path, platforms: &[&str]) -> PathBuf {
    let sh = |script: &str| {
        let status = Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(status.success(), "{script}");
    };
    let digest = |file: &str| -> (String, u64) {
        let out = Command::new("sha256sum")
            .arg(dir.join(file))
            .output()
            .unwrap();
        let hex = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .to_string();
        let size = std::fs::metadata(dir.join(file)).unwrap().len();
        (hex, size)
    };
    let add_blob = |file: &str| -> (String, u64) {
        let (hex, size) = digest(file);
        std::fs::rename(dir.join(file), dir.join("layout/blobs/sha256").join(&hex)).unwrap();
        (format!("sha256:{hex}"), size)
    };
    std::fs::create_dir_all(dir.join("layout/blobs/sha256")).unwrap();
    let mut manifests = Vec::new();
    for arch in platforms {
        let root = format!("root-{arch}");
        sh(&format!(
            "mkdir -p {root}/usr/local/bin {root}/etc && printf '#!/bin/sh\\necho {arch} \"$@\"\\n' > {root}/usr/local/bin/membench && chmod 755 {root}/usr/local/bin/membench && echo 'nonroot:x:65532:65532::/:/sbin/nologin' > {root}/etc/passwd && tar -czf layer.tar.gz -C {root} . && rm -r {root}"
        ));
        let (layer, layer_size) = add_blob("layer.tar.gz");
        let config = serde_json::json!({
            "architecture": arch, "os": "linux",
            "config": {"User": "65532:65532", "Entrypoint": ["/usr/local/bin/membench"], "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"]},
            "rootfs": {"type": "layers", "diff_ids": []},
        });
        std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
        let (config, config_size) = add_blob("config.json");
        let manifest = serde_json::json!({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": config_size},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer, "size": layer_size}],
        });
        std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
        let (manifest, manifest_size) = add_blob("manifest.json");
        manifests.push(serde_json::json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest,
            "size": manifest_size, "platform": {"architecture": arch, "os": "linux"},
        }));
    }
    let index = serde_json::json!({"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": manifests});
    std::fs::write(dir.join("index.json"), index.to_string()).unwrap();
    let (index, index_size) = add_blob("index.json");
    let top = serde_json::json!({"schemaVersion": 2, "manifests": [{"mediaType": INDEX_MEDIA_TYPE, "digest": index, "size": index_size}]});
    std::fs::write(dir.join("layout/index.json"), top.to_string()).unwrap();
    std::fs::write(
        dir.join("layout/oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    sh("tar -cf membench-oci.tar -C layout . && rm -r layout");
    dir.join("membench-oci.tar")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("membench-oci-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_nodes_platform_is_unpacked_with_its_config_and_reused_afterwards() {
        let dir = scratch("unpack");
        let archive = write_test_archive(&dir, &["amd64", "arm64"]);
        let cache = dir.join("cache");
        let arm64 = unpack(&archive, "arm64", &cache).unwrap();
        assert_eq!(arm64.platform, "linux/arm64");
        assert_eq!(arm64.config.entrypoint, ["/usr/local/bin/membench"]);
        assert_eq!(arm64.config.user.as_deref(), Some("65532:65532"));
        let script = std::fs::read_to_string(arm64.root.join("usr/local/bin/membench")).unwrap();
        assert!(script.contains("echo arm64"), "{script}");
        let amd64 = unpack(&archive, "amd64", &cache).unwrap();
        assert_ne!(amd64.manifest_digest, arm64.manifest_digest);
        assert_eq!(amd64.image_digest, arm64.image_digest);
        // Once unpacked, the copy is used as it is (the archive is not read past its index).
        std::fs::write(arm64.root.join("marker"), "").unwrap();
        let again = unpack(&archive, "arm64", &cache).unwrap();
        assert!(again.root.join("marker").is_file());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_platform_the_image_lacks_is_a_pull_failure_naming_the_ones_it_has() {
        let dir = scratch("platform");
        let archive = write_test_archive(&dir, &["amd64"]);
        let err = unpack(&archive, "arm64", &dir.join("cache")).unwrap_err();
        assert!(
            err.0.contains("no matching manifest for linux/arm64")
                && err.0.contains("it has linux/amd64"),
            "{err}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_damaged_blob_is_refused() {
        let dir = scratch("damaged");
        let archive = write_test_archive(&dir, &["amd64"]);
        // Replace the archive by one whose index blob is altered but keeps its name.
        let layout = dir.join("layout");
        std::fs::create_dir_all(&layout).unwrap();
        run(Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&layout))
        .unwrap();
        let index: Value =
            serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
        let blob =
            layout.join(blob_path(index["manifests"][0]["digest"].as_str().unwrap()).unwrap());
        let mut bytes = std::fs::read(&blob).unwrap();
        bytes.push(b' ');
        std::fs::write(&blob, bytes).unwrap();
        run(Command::new("tar")
            .arg("-cf")
            .arg(&archive)
            .arg("-C")
            .arg(&layout)
            .arg("."))
        .unwrap();
        let err = unpack(&archive, "amd64", &dir.join("cache")).unwrap_err();
        assert!(err.0.contains("does not match its digest"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
