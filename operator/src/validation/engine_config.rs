//! An engine entry's settings: `engines[].config` checked against the allowlist of
//! memory-relevant settings (`crd::engine_settings`) with each value's form, `engines[].args`
//! read the way each engine reads its command line (Redis and Valkey: `--name value...`;
//! Dragonfly's flags also `-name`, `-name=value`, `--name=value`) so that a cluster can hold
//! them to the same allowlist, and the command-line words a config becomes.

use std::collections::BTreeMap;

use crate::crd::engine_settings::{
    DRAGONFLY_ARGS_ONLY, DRAGONFLY_SETTINGS, MAX_CONFIG_SETTINGS, MAX_CONFIG_VALUE, REDIS_SETTINGS,
    Setting, ValueKind,
};
use crate::crd::{EngineKind, EngineSpec, MemoryBenchmarkSpec};

/// The settings `engines[].config` takes for an engine.
pub fn config_settings(engine: EngineKind) -> &'static [Setting] {
    match engine {
        EngineKind::Redis | EngineKind::Valkey => REDIS_SETTINGS,
        EngineKind::Dragonfly => DRAGONFLY_SETTINGS,
    }
}

/// Settings that would open the engine, move or write its files, or run code in it, and why a
/// benchmark may not change them. A name here is refused with its reason; any other name not
/// in the allowlist is refused as not memory-relevant.
const OPENING_SETTINGS: &[(&str, &str)] = &[
    (
        "protected-mode",
        "protected mode is the operator's to set: the engine is reached only by its client",
    ),
    (
        "bind",
        "the engine listens where membench puts it, reachable by its client only",
    ),
    (
        "port",
        "the engine listens where membench puts it, reachable by its client only",
    ),
    (
        "enable-debug-command",
        "DEBUG lets any client that reaches the engine crash it or change it",
    ),
    (
        "enable-module-command",
        "MODULE LOAD lets any client that reaches the engine run code in it",
    ),
    (
        "enable-protected-configs",
        "it lets any client that reaches the engine move its files with CONFIG SET dir",
    ),
    ("loadmodule", "a module runs its own code inside the engine"),
    (
        "requirepass",
        "a password in the spec is there for anyone who can read the benchmark: use spec.auth.passwordSecretRef",
    ),
    ("dir", "it moves where the engine writes its files"),
    (
        "dbfilename",
        "it turns snapshots back on or moves their file",
    ),
    (
        "include",
        "it reads settings from a file membench never checked",
    ),
    ("aclfile", "it reads users and passwords from a file"),
    (
        "rename-command",
        "a renamed command hides the engine's configuration from membench's checks",
    ),
    (
        "admin_nopass",
        "it opens Dragonfly's admin console without a password",
    ),
    (
        "admin_port",
        "it opens a second, admin port on Dragonfly that its NetworkPolicy does not cover",
    ),
    ("admin_bind", "it moves Dragonfly's admin console"),
    (
        "memcached_port",
        "it opens a memcached port on Dragonfly, without the password",
    ),
    (
        "flagfile",
        "it reads Dragonfly's flags from a file membench never checked",
    ),
    (
        "fromenv",
        "it reads Dragonfly's flags from the environment, past membench's checks",
    ),
    (
        "tryfromenv",
        "it reads Dragonfly's flags from the environment, past membench's checks",
    ),
];

/// Why a setting that opens the engine would, if `name` is one (Redis names compared without
/// case and with `_` read as `-`, so that a spelling Redis would reject is named all the same).
fn opening_reason(name: &str) -> Option<&'static str> {
    let plain = name.to_ascii_lowercase().replace('_', "-");
    let name = name.to_ascii_lowercase();
    OPENING_SETTINGS
        .iter()
        .find(|(opening, _)| *opening == name || *opening == plain)
        .map(|(_, why)| *why)
        .or_else(|| {
            (plain.starts_with("enable-") && plain.ends_with("-command")).then_some(
                "it enables a command that lets any client that reaches the engine change it",
            )
        })
}

/// The setting `name` of `engine`, if the allowlist has it. Redis and Valkey compare names
/// without case, as they do; Dragonfly's flags are exact.
fn allowed(engine: EngineKind, name: &str, args: bool) -> Option<&'static Setting> {
    let extra: &[Setting] = match (engine, args) {
        (EngineKind::Dragonfly, true) => DRAGONFLY_ARGS_ONLY,
        _ => &[],
    };
    config_settings(engine)
        .iter()
        .chain(extra)
        .find(|s| match engine {
            EngineKind::Dragonfly => s.name == name,
            _ => s.name.eq_ignore_ascii_case(name),
        })
}

/// Whether `value` has the form `kind` asks for.
fn value_fits(kind: ValueKind, value: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    match kind {
        ValueKind::Count => digits(value),
        ValueKind::SignedCount => digits(value.strip_prefix('-').unwrap_or(value)),
        ValueKind::Bytes => {
            let lower = value.to_ascii_lowercase();
            let number = ["kb", "mb", "gb", "k", "m", "g"]
                .iter()
                .find_map(|unit| lower.strip_suffix(unit))
                .unwrap_or(&lower);
            digits(number)
        }
        ValueKind::YesNo => value == "yes" || value == "no",
        ValueKind::TrueFalse => value == "true" || value == "false",
        ValueKind::Percent => digits(value) && value.parse::<u32>().is_ok_and(|p| p <= 100),
        ValueKind::Ratio => {
            value.len() <= 8
                && value.bytes().all(|b| b.is_ascii_digit() || b == b'.')
                && value.parse::<f64>().is_ok_and(|r| (0.0..=1.0).contains(&r))
        }
        ValueKind::OneOf(words) => words.contains(&value),
    }
}

/// The allowed names of `engine`, for a message.
fn allowed_names(engine: EngineKind, args: bool) -> String {
    let mut names: Vec<&str> = config_settings(engine).iter().map(|s| s.name).collect();
    if args && engine == EngineKind::Dragonfly {
        names.extend(DRAGONFLY_ARGS_ONLY.iter().map(|s| s.name));
    }
    names.join(", ")
}

/// Checks `engines[i].config`: at most 16 settings, each a memory-relevant setting of the
/// engine with a value of its form, `maxmemory-policy` only with a `maxmemory` to act at (or
/// with `spec.eviction`, whose maxmemory it may take: `eviction`), and
/// none also set in `args` (which come later and would win unseen).
pub fn check_config(i: usize, engine: &EngineSpec, eviction: bool) -> Result<(), String> {
    let config = &engine.config;
    if config.len() > MAX_CONFIG_SETTINGS {
        return Err(format!(
            "spec.engines[{i}].config has {} settings: at most {MAX_CONFIG_SETTINGS}",
            config.len()
        ));
    }
    for (name, value) in config {
        let field = format!("spec.engines[{i}].config.{name}");
        let Some(setting) = allowed(engine.engine, name, false) else {
            let why = opening_reason(name).map_or_else(
                || "it is not a memory-relevant setting".to_string(),
                |why| format!("it is not a memory setting and would open the engine: {why}"),
            );
            return Err(format!(
                "{field}: membench does not let a benchmark change {name} ({why}); for {} config takes {}",
                engine.engine,
                allowed_names(engine.engine, false)
            ));
        };
        if value.len() > MAX_CONFIG_VALUE || !value_fits(setting.kind, value) {
            return Err(format!(
                "{field}: invalid value '{value}': {name} takes {}",
                setting.kind.describe()
            ));
        }
    }
    let arg_names: Vec<String> = settings_in_args(engine.engine, &engine.args)
        .map(|settings| settings.into_iter().map(|s| s.name).collect())
        .unwrap_or_default();
    if let Some(twice) = config.keys().find(|name| {
        arg_names
            .iter()
            .any(|arg| arg.eq_ignore_ascii_case(name.as_str()))
    }) {
        return Err(format!(
            "spec.engines[{i}]: {twice} is set in both config and args, and args would win unseen; set it in config only"
        ));
    }
    let has_maxmemory = config.contains_key("maxmemory")
        || arg_names
            .iter()
            .any(|a| a.eq_ignore_ascii_case("maxmemory"));
    // With spec.eviction, a policy alone is that phase's, at spec.eviction.maxmemory.
    if let Some(policy) = config.get("maxmemory-policy")
        && policy != "noeviction"
        && !has_maxmemory
        && !eviction
    {
        return Err(format!(
            "spec.engines[{i}].config.maxmemory-policy: {policy} evicts only once used memory reaches maxmemory, and this engine has none, so it would change nothing; set config.maxmemory too"
        ));
    }
    Ok(())
}

/// One setting of a command line, as written.
#[derive(Clone, Debug, PartialEq)]
pub struct ArgSetting {
    /// Its name, without the dashes.
    pub name: String,
    /// The values that follow it (or the one after `=`).
    pub values: Vec<String>,
    /// The words it took on the command line, for a message.
    pub written: String,
}

/// A word that is a value, not a setting's name: it does not start with `-`, or it is a
/// negative number (`--list-max-listpack-size -2`).
fn is_value(word: &str) -> bool {
    !word.starts_with('-')
        || word[1..]
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit() || b == b'.')
}

/// Reads `args` as `engine` reads its command line: each setting is a name with its values
/// after it. Redis and Valkey take `--name value...` (Redis starts a new setting at every
/// `--`); Dragonfly (Abseil flags) also takes one dash and `=value`. A word that belongs to no
/// setting (a config file's path, a single-dash word Redis would read as a value) is an error.
pub fn settings_in_args(engine: EngineKind, args: &[String]) -> Result<Vec<ArgSetting>, String> {
    let mut settings: Vec<ArgSetting> = Vec::new();
    for word in args {
        if is_value(word) {
            match settings.last_mut() {
                Some(last) => {
                    last.values.push(word.clone());
                    last.written = format!("{} {word}", last.written);
                }
                None => {
                    return Err(format!(
                        "'{word}' comes before any setting: args are settings such as --hash-max-listpack-entries 512, and a config file is not taken"
                    ));
                }
            }
            continue;
        }
        let name = match engine {
            EngineKind::Dragonfly => word
                .strip_prefix("--")
                .or_else(|| word.strip_prefix('-'))
                .unwrap_or(word),
            EngineKind::Redis | EngineKind::Valkey => match word.strip_prefix("--") {
                Some(name) => name,
                None => {
                    return Err(format!(
                        "'{word}' is not a setting: {engine} takes --name value, and reads a single-dash word as a value of the setting before it"
                    ));
                }
            },
        };
        let (name, inline) = match name.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (name, None),
        };
        if name.is_empty() || name.starts_with('-') {
            return Err(format!("'{word}' is not a setting's name"));
        }
        settings.push(ArgSetting {
            name: name.to_string(),
            values: inline.into_iter().collect(),
            written: word.clone(),
        });
    }
    Ok(settings)
}

/// Why `engines[].args` may not run in a cluster, if it may not: every setting must be one of
/// `config`'s (or Dragonfly's `proactor_threads`) with one value of its form.
pub fn check_args(engine: EngineKind, args: &[String]) -> Result<(), ArgsRefusal> {
    let settings = settings_in_args(engine, args).map_err(ArgsRefusal::Unreadable)?;
    for setting in settings {
        if let Some(why) = opening_reason(&setting.name) {
            return Err(ArgsRefusal::Opening {
                written: setting.written,
                why,
            });
        }
        let Some(allowed) = allowed(engine, &setting.name, true) else {
            return Err(ArgsRefusal::NotAllowed {
                written: setting.written,
                allowed: allowed_names(engine, true),
            });
        };
        let value = match setting.values.as_slice() {
            [value] => value,
            _ => {
                return Err(ArgsRefusal::BadValue {
                    written: setting.written,
                    takes: format!("one value, {}", allowed.kind.describe()),
                });
            }
        };
        if value.len() > MAX_CONFIG_VALUE || !value_fits(allowed.kind, value) {
            return Err(ArgsRefusal::BadValue {
                written: setting.written,
                takes: allowed.kind.describe(),
            });
        }
    }
    Ok(())
}

/// Why args were refused.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgsRefusal {
    /// A word that is no setting.
    Unreadable(String),
    /// A setting that would open the engine.
    Opening { written: String, why: &'static str },
    /// A setting outside the allowlist.
    NotAllowed { written: String, allowed: String },
    /// An allowed setting with a value not of its form.
    BadValue { written: String, takes: String },
}

/// The names of the allowlisted settings an entry sets, in `config` and in `args`: the ones
/// its client reads back with `CONFIG GET`.
pub fn settings_to_read_back(engine: &EngineSpec) -> Vec<String> {
    let mut names: Vec<String> = engine.config.keys().cloned().collect();
    for setting in settings_in_args(engine.engine, &engine.args).unwrap_or_default() {
        if let Some(allowed) = allowed(engine.engine, &setting.name, true)
            && !names.iter().any(|n| n.eq_ignore_ascii_case(allowed.name))
        {
            names.push(allowed.name.to_string());
        }
    }
    names.truncate(MAX_CONFIG_SETTINGS);
    names
}

/// The command-line words `config` becomes: `--name value` for Redis and Valkey,
/// `--name=value` for Dragonfly.
pub fn config_args(engine: EngineKind, config: &BTreeMap<String, String>) -> Vec<String> {
    match engine {
        EngineKind::Redis | EngineKind::Valkey => config
            .iter()
            .flat_map(|(name, value)| [format!("--{name}"), value.clone()])
            .collect(),
        EngineKind::Dragonfly => config
            .iter()
            .map(|(name, value)| format!("--{name}={value}"))
            .collect(),
    }
}

/// The arguments that start an engine in cluster mode. The cluster config file is named
/// relative to the engine's working directory, its data directory both locally and in pods.
pub fn cluster_args(engine: EngineKind) -> Vec<String> {
    match engine {
        EngineKind::Redis | EngineKind::Valkey => [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
        ]
        .map(String::from)
        .to_vec(),
        EngineKind::Dragonfly => vec!["--cluster_mode=emulated".into()],
    }
}

/// The arguments an entry asks for, after membench's own: cluster mode when it asks for it,
/// its `config` as settings, then its `args` (which therefore win over all of them).
pub fn entry_args(engine: &EngineSpec) -> Vec<String> {
    let mut args = if engine.is_cluster() {
        cluster_args(engine.engine)
    } else {
        Vec::new()
    };
    args.extend(config_args(engine.engine, &engine.config));
    args.extend(engine.args.iter().cloned());
    args
}

#[cfg(test)]
#[path = "engine_config_tests.rs"]
mod tests;

/// Dragonfly's defragmentation flags a defrag window needs (`spec.churn.defrag`), and the values
/// membench starts it with. Dragonfly cannot switch its defragmentation at runtime: it checks
/// every `mem_defrag_check_sec_interval` (60 s by default) whether the waste in its pages passed
/// `mem_defrag_waste_threshold` (0.2) while its used memory is above `mem_defrag_threshold`
/// (0.7) of maxmemory. A check every second and a waste threshold of 5% (as Redis and Valkey get
/// thresholds low enough to act) leave it idle through the load and the rounds, under the 0.7
/// gate; the window lifts used memory over that gate by lowering maxmemory
/// (`client::phases::churn::defrag`).
pub const DRAGONFLY_DEFRAG_FLAGS: [(&str, &str); 2] = [
    ("mem_defrag_check_sec_interval", "1"),
    ("mem_defrag_waste_threshold", "0.05"),
];

/// The settings of an entry's `config` that, with `spec.eviction`, are the load past
/// maxmemory's rather than the engine's from its start (the load before it would evict).
const EVICTION_SETTINGS: [&str; 2] = ["maxmemory", "maxmemory-policy"];

/// Whether `name` is one of the entry's settings held back for `spec.eviction`.
fn held_for_eviction(spec: &MemoryBenchmarkSpec, name: &str) -> bool {
    spec.eviction.is_some()
        && EVICTION_SETTINGS
            .iter()
            .any(|s| s.eq_ignore_ascii_case(name))
}

/// The entry as its engine starts: with `spec.churn.defrag`, a Dragonfly entry gets
/// [`DRAGONFLY_DEFRAG_FLAGS`] in its `config`, each unless the entry sets it itself; with
/// `spec.eviction`, its `config.maxmemory` and `config.maxmemory-policy` wait for that phase
/// (`EvictionSpec::for_entry`).
pub fn started_entry<'a>(
    engine: &'a EngineSpec,
    spec: &MemoryBenchmarkSpec,
) -> std::borrow::Cow<'a, EngineSpec> {
    let defrag =
        engine.engine == EngineKind::Dragonfly && spec.churn.as_ref().is_some_and(|c| c.defrag);
    let held = engine.config.keys().any(|k| held_for_eviction(spec, k));
    if !defrag && !held {
        return std::borrow::Cow::Borrowed(engine);
    }
    let mut started = engine.clone();
    started.config.retain(|k, _| !held_for_eviction(spec, k));
    for (name, value) in DRAGONFLY_DEFRAG_FLAGS.iter().filter(|_| defrag) {
        let set_by_entry = engine.config.keys().any(|k| k.eq_ignore_ascii_case(name))
            || engine
                .args
                .iter()
                .any(|a| a.trim_start_matches('-').split('=').next() == Some(name));
        if !set_by_entry {
            started.config.insert(name.to_string(), value.to_string());
        }
    }
    std::borrow::Cow::Owned(started)
}

/// [`settings_to_read_back`] but for those held back for `spec.eviction` (the engine does not
/// have them while its figures are read; the eviction's result reports them).
pub fn settings_read_back_in(engine: &EngineSpec, spec: &MemoryBenchmarkSpec) -> Vec<String> {
    let mut names = settings_to_read_back(engine);
    names.retain(|name| !held_for_eviction(spec, name));
    names
}
