use super::*;
use crate::validation::spec_file::parse_specs;

fn spec(engines: &str, placement: &str) -> MemoryBenchmarkSpec {
    parse_specs(&format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: p}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: {engines}\n  workload: {{sortedSet: {{members: 1000}}}}\n{placement}"
    ))
    .unwrap()
    .remove(0)
    .spec
}

#[test]
fn the_official_images_of_every_engine_are_allowed_by_default() {
    let policy = Policy::default();
    let official = spec(
        "[{engine: redis, version: \"7.4.1\"}, {engine: valkey, version: \"9.1.2\"}, {engine: dragonfly, version: \"1.40.0\"}, {engine: redis, version: \"8.2\", name: pinned, image: \"redis:8.2@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}, {engine: valkey, version: \"9.1\", name: hub, image: \"docker.io/valkey/valkey:9.1-alpine\"}]",
        "",
    );
    assert_eq!(policy.check(&official), Ok(()));
}

#[test]
fn an_engine_mirror_allows_the_images_it_rewrites_to_without_naming_them_in_allowed_images() {
    let registry = EngineRegistry::parse("mirror.example.com:5000/hub").unwrap();
    let defaults = spec(
        "[{engine: redis, version: \"8.2.3\"}, {engine: valkey, version: \"9.1.2\"}, {engine: dragonfly, version: \"1.40.0\"}]",
        "",
    );
    // The default patterns, and a list an administrator gave: the mirror's repositories are
    // added to both.
    for given in [None, Some(vec!["redis".to_string(), " ".to_string()])] {
        let policy = Policy {
            allowed_images: Policy::allowed_images_with(given.clone(), Some(&registry)),
            ..Policy::default()
        };
        assert_eq!(
            policy.check_with(&defaults, Some(&registry)),
            Ok(()),
            "{given:?}: {:?}",
            policy.allowed_images
        );
        assert!(
            !policy.allowed_images.iter().any(|p| p.trim().is_empty()),
            "{:?}",
            policy.allowed_images
        );
        // Only the mirror's engine repositories, not the whole mirror.
        assert!(!policy.image_allowed("mirror.example.com:5000/hub/other/thing:1"));
    }
    // Without the mirror's patterns the same images are refused, naming the mirror.
    let without = Policy::default();
    let err = without
        .check_with(&defaults, Some(&registry))
        .unwrap_err()
        .to_string();
    assert!(err.contains("engineRegistry"), "{err}");
}

#[test]
fn an_image_outside_allowed_images_is_refused_naming_the_setting() {
    let policy = Policy::default();
    let mirror = spec(
        "[{engine: redis, version: \"7.4.1\", image: \"registry.example.com/mirror/redis:7.4.1\"}]",
        "",
    );
    let err = policy.check(&mirror).unwrap_err().to_string();
    assert!(err.starts_with("spec.engines[0].image"), "{err}");
    assert!(
        err.contains("allowedImages") && err.contains("--allowed-images"),
        "{err}"
    );
    // A repository that only starts like an official one.
    let lookalike = spec(
        "[{engine: redis, version: \"7.4.1\", image: \"redis-evil:7.4.1\"}]",
        "",
    );
    assert!(policy.check(&lookalike).is_err());
    let nested = spec(
        "[{engine: redis, version: \"7.4.1\", image: \"valkey/valkey/x:1\"}]",
        "",
    );
    assert!(policy.check(&nested).is_err());
}

#[test]
fn patterns_allow_a_registry_path_with_a_star_and_pin_a_tag_when_they_name_one() {
    let policy = Policy {
        allowed_images: vec![
            "registry.example.com:5000/mirror/*".into(),
            "redis:7.4.1".into(),
        ],
        ..Policy::default()
    };
    assert!(policy.image_allowed("registry.example.com:5000/mirror/redis:7.4.1"));
    assert!(policy.image_allowed("registry.example.com:5000/mirror/valkey@sha256:ab"));
    assert!(!policy.image_allowed("registry.example.com:5000/mirror/deep/redis:1"));
    assert!(policy.image_allowed("redis:7.4.1"));
    assert!(!policy.image_allowed("redis:7.4.2"));
    // The official images are no longer allowed once the setting names others.
    let official = spec("[{engine: valkey, version: \"9.1.2\"}]", "");
    let err = policy.check(&official).unwrap_err().to_string();
    assert!(
        err.contains("spec.engines[0] (its official image)"),
        "{err}"
    );
}

#[test]
fn args_that_open_the_engine_are_refused_unless_allowed() {
    let refused = [
        (
            "redis",
            "[--protected-mode, \"yes\"]",
            "would open the engine again",
        ),
        (
            "redis",
            "[--enable-debug-command, \"yes\"]",
            "would open the engine again",
        ),
        (
            "redis",
            "[--enable-module-command, local]",
            "would open the engine again",
        ),
        (
            "redis",
            "[--enable-protected-configs, \"yes\"]",
            "would open the engine again",
        ),
        (
            "redis",
            "[--loadmodule, /tmp/m.so]",
            "would open the engine again",
        ),
        (
            "redis",
            "[--rename-command, CONFIG, \"\"]",
            "would open the engine again",
        ),
        (
            "redis",
            "[--rename-command, FLUSHDB, \"\"]",
            "would open the engine again",
        ),
        (
            "redis",
            "[--requirepass, secret]",
            "would open the engine again",
        ),
        (
            "redis",
            "[--Enable_Debug_Command=yes]",
            "would open the engine again",
        ),
        ("redis", "[--dir, /tmp]", "would open the engine again"),
        (
            "redis",
            "[--dbfilename, dump.rdb]",
            "would open the engine again",
        ),
        ("redis", "[--bind, 0.0.0.0]", "would open the engine again"),
        ("redis", "[-requirepass, x]", "single-dash"),
        ("redis", "[/etc/redis.conf]", "comes before any setting"),
        (
            "redis",
            "[--io-threads, \"4\"]",
            "not a memory-relevant setting",
        ),
        (
            "redis",
            "[--hash-max-listpack-entries, lots]",
            "takes a whole number",
        ),
        (
            "dragonfly",
            "[-requirepass=x]",
            "would open the engine again",
        ),
        (
            "dragonfly",
            "[--admin_nopass]",
            "would open the engine again",
        ),
        (
            "dragonfly",
            "[--admin_port=7000]",
            "would open the engine again",
        ),
        (
            "dragonfly",
            "[-memcached_port=11211]",
            "would open the engine again",
        ),
        (
            "dragonfly",
            "[--flagfile=/tmp/flags]",
            "would open the engine again",
        ),
        (
            "dragonfly",
            "[--dbfilename=dump]",
            "would open the engine again",
        ),
    ];
    for (engine, args, words) in refused {
        let s = spec(
            &format!("[{{engine: {engine}, version: \"1.40.0\", args: {args}}}]"),
            "",
        );
        let err = Policy::default().check(&s).unwrap_err().to_string();
        assert!(err.starts_with("spec.engines[0].args"), "{args}: {err}");
        assert!(err.contains(words), "{args}: {err}");
        assert!(
            err.contains("--allow-open-engine-args") && err.contains("allowOpenEngineArgs"),
            "{err}"
        );
        let open = Policy {
            allow_open_engine_args: true,
            ..Policy::default()
        };
        assert_eq!(open.check(&s), Ok(()), "{args}");
    }
    let memory_settings = spec(
        "[{engine: redis, version: \"7.4.1\", args: [--maxmemory, 8gb, --hz, \"100\", --hash-max-listpack-entries, \"0\"]}, {engine: dragonfly, version: \"1.40.0\", args: [--proactor_threads=2, -cache_mode=true]}]",
        "",
    );
    assert_eq!(Policy::default().check(&memory_settings), Ok(()));
}

#[test]
fn a_toleration_of_every_taint_is_refused_unless_allowed() {
    let everything = spec(
        "[{engine: redis, version: \"7.4.1\"}]",
        "  placement:\n    tolerations: [{key: dedicated, operator: Exists}, {operator: Exists}]\n",
    );
    let err = Policy::default()
        .check(&everything)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("spec.placement.tolerations[1]"), "{err}");
    assert!(
        err.contains("allowTolerateEverything") && err.contains("--allow-tolerate-everything"),
        "{err}"
    );
    let allowed = Policy {
        allow_tolerate_everything: true,
        ..Policy::default()
    };
    assert_eq!(allowed.check(&everything), Ok(()));
}
