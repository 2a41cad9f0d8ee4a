//! What a release publishes and what it is built from: the Docker build context that
//! `.dockerignore` leaves (every workspace member and path dependency must be in it, or the
//! image's `cargo build --locked` fails), `hack/release-version.sh` (a tag must equal the chart's
//! appVersion and the crate's version), and `.github/workflows/release.yml`, checked by the real
//! actionlint (built from its Go module by `hack/build-tools.sh actionlint`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

// ---------------------------------------------------------------------------------------------
// .dockerignore, as Docker's builder reads it
// ---------------------------------------------------------------------------------------------

/// One line of a .dockerignore: a pattern over `/`-separated paths relative to the context,
/// which excludes what it matches, or re-includes it when it starts with `!`.
#[derive(Debug)]
struct Rule {
    segments: Vec<String>,
    include: bool,
}

/// The rules of a .dockerignore, as Docker's builder parses them: blank lines and `#` comments
/// dropped, a leading `!` re-includes, leading and trailing `/` and `.` segments cleaned away.
fn parse_dockerignore(text: &str) -> Vec<Rule> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (include, pattern) = match line.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, line),
            };
            assert!(
                !pattern.contains('[') && !pattern.contains('\\'),
                ".dockerignore pattern {line:?} uses a character class or escape, which this \
                 test does not read: extend glob_segment_matches"
            );
            let segments = pattern
                .split('/')
                .filter(|s| !s.is_empty() && *s != ".")
                .map(String::from)
                .collect();
            Rule { segments, include }
        })
        .collect()
}

/// `*` (any run of characters) and `?` (one character) within one path segment.
fn glob_segment_matches(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob_segment_matches(&pattern[1..], name)
                || (!name.is_empty() && glob_segment_matches(pattern, &name[1..]))
        }
        (Some(b'?'), Some(_)) => glob_segment_matches(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => glob_segment_matches(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// A pattern's segments against a path's, `**` standing for any number of segments (none too).
fn pattern_matches(pattern: &[String], path: &[&str]) -> bool {
    match pattern.first() {
        None => path.is_empty(),
        Some(s) if s == "**" => {
            (0..=path.len()).any(|skip| pattern_matches(&pattern[1..], &path[skip..]))
        }
        Some(s) => {
            !path.is_empty()
                && glob_segment_matches(s.as_bytes(), path[0].as_bytes())
                && pattern_matches(&pattern[1..], &path[1..])
        }
    }
}

/// Whether the build context holds `path` (relative, `/`-separated): the last rule that
/// matches the path or one of its parent directories decides; no rule matching keeps it.
fn in_build_context(rules: &[Rule], path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    let mut included = true;
    for rule in rules {
        let matches =
            (1..=segments.len()).any(|len| pattern_matches(&rule.segments, &segments[..len]));
        if matches {
            included = rule.include;
        }
    }
    included
}

#[test]
fn dockerignore_rules_read_as_dockers_builder_reads_them() {
    let rules = parse_dockerignore(
        "# comment\n*\n!Cargo.toml\n!operator/\n!hack/image-rootfs.sh\n**/target/\n\n!keep/**/x?.rs\n",
    );
    assert!(in_build_context(&rules, "Cargo.toml"));
    assert!(!in_build_context(&rules, "Cargo.lock"));
    assert!(in_build_context(&rules, "operator/src/lib.rs"));
    // `**/target/` excludes target directories at any depth, after the re-include of operator/.
    assert!(!in_build_context(&rules, "operator/target/debug/membench"));
    assert!(!in_build_context(&rules, "target/release/membench"));
    assert!(in_build_context(&rules, "hack/image-rootfs.sh"));
    assert!(!in_build_context(&rules, "hack/build-image.sh"));
    assert!(!in_build_context(&rules, "enginestore/Cargo.toml"));
    // `*` and `?` stay within a segment, `**` spans any number of them.
    assert!(in_build_context(&rules, "keep/a/b/x1.rs"));
    assert!(in_build_context(&rules, "keep/x1.rs"));
    assert!(!in_build_context(&rules, "keep/a/x12.rs"));
    // Without rules everything is in the context.
    assert!(in_build_context(&[], "anything/at/all"));
}

/// The workspace as cargo reads it: each member's directory, and the directory of every path
/// dependency of a member (the crates the image builds and everything cargo must load for them).
fn crates_cargo_needs() -> Vec<(String, PathBuf)> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(repo_root().join("Cargo.toml"))
        .output()
        .expect("cargo metadata starts");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut crates = BTreeMap::new();
    for package in metadata["packages"].as_array().unwrap() {
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap());
        let name = package["name"].as_str().unwrap().to_string();
        crates.insert(
            manifest.parent().unwrap().to_path_buf(),
            format!("workspace member {name}"),
        );
        for dependency in package["dependencies"].as_array().unwrap() {
            if let Some(path) = dependency["path"].as_str() {
                crates.entry(PathBuf::from(path)).or_insert_with(|| {
                    format!(
                        "path dependency {} of {name}",
                        dependency["name"].as_str().unwrap()
                    )
                });
            }
        }
    }
    assert!(
        crates.len() >= 3,
        "cargo metadata names fewer crates than the workspace has: {crates:?}"
    );
    crates.into_iter().map(|(dir, why)| (why, dir)).collect()
}

/// The files under `dir` (relative to the repository, `/`-separated), build output left out.
fn files_under(dir: &Path, root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "target") {
                    continue;
                }
                pending.push(path);
            } else {
                let relative = path.strip_prefix(root).unwrap();
                found.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    found.sort();
    found
}

/// What the build context lacks of the crates cargo needs, one line per crate.
fn left_out_of_build_context(rules: &[Rule], root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for file in ["Cargo.toml", "Cargo.lock"] {
        if !in_build_context(rules, file) {
            problems.push(format!("the workspace's {file}"));
        }
    }
    for (why, dir) in crates_cargo_needs() {
        let files = files_under(&dir, root);
        assert!(!files.is_empty(), "{why} at {} has no files", dir.display());
        let missing: Vec<&String> = files
            .iter()
            .filter(|f| !in_build_context(rules, f))
            .collect();
        if !missing.is_empty() {
            let relative = dir.strip_prefix(root).unwrap_or(&dir).display().to_string();
            problems.push(format!(
                "{why} ({relative}/: {} of {} files, such as {})",
                missing.len(),
                files.len(),
                missing[0]
            ));
        }
    }
    problems
}

#[test]
fn docker_build_context_holds_every_workspace_member_and_path_dependency() {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join(".dockerignore")).unwrap();
    let problems = left_out_of_build_context(&parse_dockerignore(&text), &root);
    assert!(
        problems.is_empty(),
        ".dockerignore leaves out of the Docker build context what `cargo build --locked` \
         needs; add a `!<dir>/` line for each:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn a_dockerignore_without_enginestore_is_caught_naming_it() {
    // The .dockerignore before issue 26: operator/ and devcluster/ re-included, enginestore/ not.
    let before = "*\n!Cargo.toml\n!Cargo.lock\n!operator/\n!devcluster/\n!hack/image-rootfs.sh\n\
                  **/target/\ntarget/\n";
    let problems = left_out_of_build_context(&parse_dockerignore(before), &repo_root());
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].starts_with("workspace member membench-enginestore (enginestore/:"),
        "{problems:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The version a tag publishes
// ---------------------------------------------------------------------------------------------

fn release_version(tag: &str) -> std::process::Output {
    Command::new(repo_root().join("hack/release-version.sh"))
        .arg(tag)
        .output()
        .expect("hack/release-version.sh starts")
}

/// `appVersion` of charts/membench/Chart.yaml.
fn chart_app_version() -> String {
    let text = std::fs::read_to_string(repo_root().join("charts/membench/Chart.yaml")).unwrap();
    let chart: Value = serde_saphyr::from_str(&text).unwrap();
    chart["appVersion"].as_str().unwrap().to_string()
}

#[test]
fn the_chart_app_version_is_the_crate_version_and_its_tag_is_accepted() {
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        chart_app_version(),
        version,
        "the chart's appVersion (the image tag it installs) is not membench's version"
    );
    let output = release_version(&format!("v{version}"));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("{version}\n")
    );
}

#[test]
fn a_tag_that_is_not_the_chart_and_crate_version_is_refused_naming_both() {
    let output = release_version("v99.0.0");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "v99.0.0 was accepted");
    assert!(output.stdout.is_empty());
    let app = chart_app_version();
    assert!(
        stderr.contains(&format!(
            "charts/membench/Chart.yaml has appVersion {app}, the tag v99.0.0 says 99.0.0"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "operator/Cargo.toml has version {}, the tag v99.0.0 says 99.0.0",
            env!("CARGO_PKG_VERSION")
        )),
        "{stderr}"
    );
    let output = release_version("release-1");
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("is not v<major>.<minor>.<patch>"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// .github/workflows
// ---------------------------------------------------------------------------------------------

fn workflow_files() -> Vec<PathBuf> {
    let dir = repo_root().join(".github/workflows");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no workflows in {}", dir.display());
    files
}

#[test]
fn actionlint_finds_nothing_in_the_workflows() {
    let actionlint = membench_devcluster::tools::actionlint()
        .unwrap_or_else(|e| panic!("this test needs actionlint: {e:#}"));
    let output = Command::new(&actionlint)
        .current_dir(repo_root())
        .arg("-no-color")
        .args(workflow_files())
        .output()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", actionlint.display()));
    assert!(
        output.status.success(),
        "actionlint ({}) reports ({}):\n{}{}",
        actionlint.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn release_workflow() -> Value {
    let text = std::fs::read_to_string(repo_root().join(".github/workflows/release.yml")).unwrap();
    serde_saphyr::from_str(&text).expect("release.yml is YAML")
}

/// The step of `job` that uses the action `uses` (owner/name, any version).
fn step<'a>(workflow: &'a Value, job: &str, uses: &str) -> &'a Value {
    workflow["jobs"][job]["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("release.yml has no job {job}"))
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.split('@').next() == Some(uses))
        })
        .unwrap_or_else(|| panic!("release.yml's {job} job does not use {uses}"))
}

/// The shell of every `run:` step of `job`, joined.
fn runs(workflow: &Value, job: &str) -> String {
    workflow["jobs"][job]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn release_workflow_pushes_the_chart_image_for_both_platforms_and_attaches_binaries_and_chart() {
    let workflow = release_workflow();
    assert_eq!(
        workflow["on"]["push"]["tags"],
        serde_json::json!(["v*"]),
        "runs on version tags"
    );
    // The tag is checked against appVersion and the crate version before anything is built.
    assert!(runs(&workflow, "version").contains("hack/release-version.sh \"$TAG\""));
    for job in ["binaries", "chart", "image"] {
        assert_eq!(workflow["jobs"][job]["needs"], "version", "{job}");
    }

    // The image: the chart's default repository, tagged with the checked version, both platforms.
    let values: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo_root().join("charts/membench/values.yaml")).unwrap(),
    )
    .unwrap();
    let repository = values["image"]["repository"].as_str().unwrap();
    assert_eq!(repository, "ghcr.io/membench/membench");
    let build = &step(&workflow, "image", "docker/build-push-action")["with"];
    assert_eq!(
        build["tags"],
        format!("{repository}:${{{{ needs.version.outputs.version }}}}")
    );
    assert_eq!(build["platforms"], "linux/amd64,linux/arm64");
    assert_eq!(build["push"], true);
    step(&workflow, "image", "docker/setup-buildx-action");
    assert_eq!(
        step(&workflow, "image", "docker/login-action")["with"]["registry"],
        "ghcr.io"
    );
    assert_eq!(
        workflow["jobs"]["image"]["permissions"]["packages"],
        "write"
    );

    // The binaries: x86_64 and aarch64 Linux, built as the image's build stage builds them.
    let targets: Vec<&str> = workflow["jobs"]["binaries"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["target"].as_str().unwrap())
        .collect();
    assert_eq!(
        targets,
        ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"]
    );
    assert!(
        runs(&workflow, "binaries")
            .contains("cargo build --release --locked -p membench --bin membench")
    );
    let dockerfile = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
    let container = workflow["jobs"]["binaries"]["container"].as_str().unwrap();
    let rust_version = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("ARG RUST_VERSION="))
        .unwrap();
    assert_eq!(
        container,
        format!("docker.io/library/rust:{rust_version}-bookworm"),
        "the binaries are built in the Dockerfile's build image"
    );

    // The chart package, and the release that gets both.
    assert!(runs(&workflow, "chart").contains("helm package charts/membench"));
    assert_eq!(
        workflow["jobs"]["release"]["needs"],
        serde_json::json!(["version", "binaries", "chart", "image"])
    );
    assert_eq!(
        workflow["jobs"]["release"]["permissions"]["contents"],
        "write"
    );
    assert!(runs(&workflow, "release").contains("gh release upload \"$TAG\" --clobber dist/*"));
}

// ---------------------------------------------------------------------------------------------
// The features the shipped binary is built with
// ---------------------------------------------------------------------------------------------

/// `membench capacity` on a saved result must read the run's floats bit for bit. serde_json
/// parses them exactly only with its `float_roundtrip` feature; a dev-dependency (jsonschema)
/// turns it on in test builds, so a unit test cannot see the shipped build lose it. The CI run
/// of 9be9258 did: its capacity test read 19445.163579120122 writes/s back as
/// 19445.16357912012 after hack/dev-cluster.sh rebuilt target/debug/membench without
/// dev-dependencies. This asks cargo for the features of the build without dev-dependencies.
#[test]
fn the_shipped_binary_reads_saved_floats_exactly() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            "membench",
            "-e",
            "features,normal",
            "-i",
            "serde_json",
        ])
        .arg("--manifest-path")
        .arg(repo_root().join("Cargo.toml"))
        .output()
        .expect("cargo tree starts");
    let tree = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        tree.contains("serde_json feature \"float_roundtrip\""),
        "the shipped membench parses JSON floats without serde_json's float_roundtrip: a saved \
         result reads back up to a unit in the last place off; add the feature to the \
         workspace's serde_json. cargo tree said:\n{tree}"
    );
}
