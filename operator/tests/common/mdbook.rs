//! The book in docs/ built with mdBook, for the tests that read it (docs_book.rs: links and
//! anchors; docs_render.rs: the pages in a browser). mdBook comes from hack/install-mdbook.sh
//! (hack/test.sh runs it and exports MEMBENCH_MDBOOK); without it a test fails naming that
//! script, never skips.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("operator/ has a parent")
        .to_path_buf()
}

/// The mdbook binary: $MEMBENCH_MDBOOK, else where hack/install-mdbook.sh installs its version.
pub fn mdbook() -> PathBuf {
    if let Some(path) = std::env::var_os("MEMBENCH_MDBOOK") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "MEMBENCH_MDBOOK={} is not a file: run hack/install-mdbook.sh, which installs mdBook and prints its path",
            path.display()
        );
        return path;
    }
    let script = std::fs::read_to_string(repo_root().join("hack/install-mdbook.sh"))
        .expect("hack/install-mdbook.sh is in the repository");
    let version = script
        .lines()
        .find_map(|l| l.strip_prefix("version="))
        .expect("hack/install-mdbook.sh pins a version= line");
    let root = std::env::var_os("MEMBENCH_MDBOOK_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                .join(format!(".cache/membench/mdbook-{version}"))
        });
    let path = root.join("bin/mdbook");
    assert!(
        path.is_file(),
        "no mdbook at {} (and MEMBENCH_MDBOOK is not set): run hack/install-mdbook.sh (hack/test.sh does)",
        path.display()
    );
    path
}

/// `mdbook build docs` into a fresh directory under the system's temporary directory, named
/// for the test (`purpose`); fails with mdBook's own error.
pub fn build_book(purpose: &str) -> PathBuf {
    let out = std::env::temp_dir().join(format!("membench-book-{purpose}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let output = Command::new(mdbook())
        .arg("build")
        .arg(repo_root().join("docs"))
        .arg("--dest-dir")
        .arg(&out)
        .output()
        .expect("mdbook runs");
    assert!(
        output.status.success(),
        "mdbook build docs failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}
