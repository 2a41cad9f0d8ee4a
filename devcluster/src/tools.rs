//! The command-line tools that `hack/build-tools.sh` builds, for tests that run them. Tests use
//! these and never a same-named program that happens to be on PATH: the machine's kubectl may
//! be several minor versions older than the control plane, outside the supported version skew.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::cluster::repo_root;

/// Overrides the kubectl tests run (hack/test.sh sets it to the built one).
pub const KUBECTL_ENV: &str = "MEMBENCH_KUBECTL";

/// The kubectl built from the control plane's own Kubernetes release
/// (`<bin dir>/kubernetes-<KUBERNETES_VERSION>/kubectl`), or `MEMBENCH_KUBECTL`. An error that
/// says how to build it when it is missing.
pub fn kubectl() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(KUBECTL_ENV) {
        let path = PathBuf::from(path);
        anyhow::ensure!(
            is_executable(&path),
            "{KUBECTL_ENV}={} is not an executable file",
            path.display()
        );
        return Ok(path);
    }
    let version = pinned_version("KUBERNETES_VERSION")?;
    let path = built_tools_dir()?
        .join(format!("kubernetes-{version}"))
        .join("kubectl");
    anyhow::ensure!(
        is_executable(&path),
        "no kubectl {version} at {}: run hack/build-tools.sh kubernetes (a kubectl on PATH is \
         not used, since it may be outside the control plane's version skew), or set \
         {KUBECTL_ENV}",
        path.display()
    );
    Ok(path)
}

/// Overrides the actionlint tests run.
pub const ACTIONLINT_ENV: &str = "MEMBENCH_ACTIONLINT";

/// The actionlint built from its Go module at the pinned version
/// (`<bin dir>/actionlint-<ACTIONLINT_VERSION>/actionlint`), or `MEMBENCH_ACTIONLINT`. An error
/// that says how to build it when it is missing.
pub fn actionlint() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(ACTIONLINT_ENV) {
        let path = PathBuf::from(path);
        anyhow::ensure!(
            is_executable(&path),
            "{ACTIONLINT_ENV}={} is not an executable file",
            path.display()
        );
        return Ok(path);
    }
    let version = pinned_version("ACTIONLINT_VERSION")?;
    let path = built_tools_dir()?
        .join(format!("actionlint-{version}"))
        .join("actionlint");
    anyhow::ensure!(
        is_executable(&path),
        "no actionlint {version} at {}: run hack/build-tools.sh actionlint, or set \
         {ACTIONLINT_ENV}",
        path.display()
    );
    Ok(path)
}

/// The `ctr` hack/build-tools.sh builds with the real nodes' containerd
/// (`<bin dir>/containerd-<CONTAINERD_VERSION>/ctr`), for tests that look into a real node's
/// containerd (`--address <state>/nodes/<node>/containerd.sock`).
pub fn ctr() -> anyhow::Result<PathBuf> {
    let version = pinned_version("CONTAINERD_VERSION")?;
    let path = built_tools_dir()?
        .join(format!("containerd-{version}"))
        .join("ctr");
    anyhow::ensure!(
        is_executable(&path),
        "no ctr {version} at {}: run hack/build-tools.sh containerd",
        path.display()
    );
    Ok(path)
}

/// Where hack/build-tools.sh keeps its binaries (`--print-bin-dir`).
fn built_tools_dir() -> anyhow::Result<PathBuf> {
    let script = repo_root().join("hack/build-tools.sh");
    let output = std::process::Command::new(&script)
        .arg("--print-bin-dir")
        .output()
        .with_context(|| format!("running {} --print-bin-dir", script.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "{} --print-bin-dir failed: {}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim(),
    ))
}

/// A version pinned in hack/tool-versions.env (`NAME=value`).
fn pinned_version(name: &str) -> anyhow::Result<String> {
    let file = repo_root().join("hack/tool-versions.env");
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    parse_pinned_version(&text, name).with_context(|| format!("{} pins no {name}", file.display()))
}

fn parse_pinned_version(text: &str, name: &str) -> Option<String> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix(name)?.strip_prefix('='))
        .map(|value| value.trim().trim_matches('"').to_string())
        .find(|value| !value.is_empty())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_versions_are_read_by_exact_name() {
        let env = "# pins\nKUBERNETES_VERSION=v1.37.2\nETCD_VERSION=v3.6.16\n";
        assert_eq!(
            parse_pinned_version(env, "KUBERNETES_VERSION").as_deref(),
            Some("v1.37.2")
        );
        assert_eq!(
            parse_pinned_version(env, "ETCD_VERSION").as_deref(),
            Some("v3.6.16")
        );
        assert_eq!(parse_pinned_version(env, "HELM_VERSION"), None);
    }

    #[test]
    fn the_kubectl_tests_run_is_the_control_planes_version() {
        // The repository's own pin, and the binary hack/build-tools.sh builds for it: a test
        // that runs kubectl must fail here rather than fall back to another kubectl.
        let kubectl = kubectl().expect("the built kubectl");
        let output = std::process::Command::new(&kubectl)
            .args(["version", "--client", "-o", "json"])
            .output()
            .expect("kubectl runs");
        let text = String::from_utf8_lossy(&output.stdout);
        let version = pinned_version("KUBERNETES_VERSION").unwrap();
        assert!(
            text.contains(&format!("\"gitVersion\": \"{version}\"")),
            "{} is not {version}: {text}",
            kubectl.display()
        );
    }
}
