//! What each engine kind can do, in one table: how it saves and syncs a replica (whether a
//! fork copies the pages written meanwhile), which introspection commands it answers, how its
//! defragmentation is switched on, and how its maxmemory and eviction policy are set. Every
//! decision that depended on an engine's name reads this table instead, so a new engine kind
//! is one row here. Where a capability can be measured it is, and the measurement wins: a
//! phase reads whether a save forked from the engine's process tree and its copy from INFO
//! (`client::phases::snapshot`), this table only says what to expect and which command to send.

use super::engine_spec::EngineKind;

/// How an engine's active defragmentation is switched on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defragmentation {
    /// A runtime setting (`CONFIG SET activedefrag yes`; a build without its bundled jemalloc
    /// refuses it).
    RuntimeSwitch { setting: &'static str },
    /// Always on above a share of maxmemory (Dragonfly's `mem_defrag_threshold`): opened by
    /// lowering maxmemory under the data (`client::phases::churn::defrag`).
    MaxmemoryGate,
}

/// How an engine's maxmemory is given to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxmemoryForm {
    /// A config-file line, `maxmemory <bytes>` (also `CONFIG SET maxmemory` at runtime).
    ConfigLine,
    /// A command-line flag, `--maxmemory=<bytes>` (also `CONFIG SET maxmemory` at runtime).
    Flag,
}

impl MaxmemoryForm {
    /// The setting as a user writes it for `bytes`.
    pub fn written(self, bytes: u64) -> String {
        match self {
            MaxmemoryForm::ConfigLine => format!("maxmemory {bytes}"),
            MaxmemoryForm::Flag => format!("--maxmemory={bytes}"),
        }
    }
}

/// What one engine kind can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineCapabilities {
    /// A save forks a child that writes the snapshot (`BGSAVE`): every page written meanwhile
    /// is copied, and INFO persistence reports the copy (`rdb_last_cow_size`).
    pub forks_to_save: bool,
    /// A replica's full sync forks the same way (disk-backed or diskless).
    pub forks_for_replica_sync: bool,
    /// The command that saves: `BGSAVE` (answers at once, INFO says when it ends) or `SAVE`
    /// (answers when the save ends).
    pub save_command: &'static str,
    /// Its save refuses an empty `dbfilename` (the run starts it with persistence off,
    /// `--dbfilename=`): the phase names the file, and removes what the save wrote.
    pub save_needs_file_name: bool,
    /// It answers `OBJECT ENCODING key` (Dragonfly has no `OBJECT` command).
    pub answers_object_encoding: bool,
    /// It answers `MEMORY STATS` (Dragonfly does, without the per-database tables
    /// `overhead.hashtable.main` that Redis and Valkey list).
    pub answers_memory_stats: bool,
    /// How its active defragmentation is switched on.
    pub defragmentation: Defragmentation,
    /// How its maxmemory is written.
    pub maxmemory: MaxmemoryForm,
    /// The runtime setting of its eviction policy; None where a startup flag decides
    /// (Dragonfly's `cache_mode`).
    pub eviction_policy_setting: Option<&'static str>,
    /// Its keyspace is a table per thread (Dragonfly's shards): projecting it needs the
    /// thread count (INFO server `thread_count`).
    pub keyspace_per_thread: bool,
    /// It is offered as ElastiCache, whose memory reserve is `reserved-memory-percent`.
    pub elasticache: bool,
    /// The least maxmemory it starts with, per thread (Dragonfly refuses less than 256 MiB a
    /// thread, `super::dragonfly_memory`); 0: no such floor.
    pub least_maxmemory_per_thread: u64,
}

const REDIS_AND_VALKEY: EngineCapabilities = EngineCapabilities {
    forks_to_save: true,
    forks_for_replica_sync: true,
    save_command: "BGSAVE",
    save_needs_file_name: false,
    answers_object_encoding: true,
    answers_memory_stats: true,
    defragmentation: Defragmentation::RuntimeSwitch {
        setting: "activedefrag",
    },
    maxmemory: MaxmemoryForm::ConfigLine,
    eviction_policy_setting: Some("maxmemory-policy"),
    keyspace_per_thread: false,
    elasticache: true,
    least_maxmemory_per_thread: 0,
};

const DRAGONFLY: EngineCapabilities = EngineCapabilities {
    forks_to_save: false,
    forks_for_replica_sync: false,
    save_command: "SAVE",
    save_needs_file_name: true,
    answers_object_encoding: false,
    answers_memory_stats: true,
    defragmentation: Defragmentation::MaxmemoryGate,
    maxmemory: MaxmemoryForm::Flag,
    eviction_policy_setting: None,
    keyspace_per_thread: true,
    elasticache: false,
    least_maxmemory_per_thread: super::dragonfly_memory::MAXMEMORY_PER_THREAD,
};

impl EngineKind {
    /// What this engine kind can do.
    pub fn capabilities(self) -> &'static EngineCapabilities {
        match self {
            EngineKind::Redis | EngineKind::Valkey => &REDIS_AND_VALKEY,
            EngineKind::Dragonfly => &DRAGONFLY,
        }
    }

    /// The capabilities of the engine an INFO reply named (`redis`, `valkey`, `dragonfly`);
    /// an engine membench does not know is taken as Redis, the protocol every one speaks.
    pub fn capabilities_of(name: &str) -> &'static EngineCapabilities {
        name.parse::<EngineKind>()
            .map_or(&REDIS_AND_VALKEY, EngineKind::capabilities)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_redis_and_valkey_fork_to_save_and_sync() {
        for kind in EngineKind::ALL {
            let can = kind.capabilities();
            let forks = kind != EngineKind::Dragonfly;
            assert_eq!(
                (can.forks_to_save, can.forks_for_replica_sync),
                (forks, forks),
                "{kind}"
            );
            assert_eq!(can.save_command, if forks { "BGSAVE" } else { "SAVE" });
        }
    }

    #[test]
    fn the_maxmemory_form_is_a_config_line_or_dragonflys_flag() {
        assert_eq!(
            EngineKind::Valkey.capabilities().maxmemory.written(1024),
            "maxmemory 1024"
        );
        assert_eq!(
            EngineKind::Dragonfly.capabilities().maxmemory.written(1024),
            "--maxmemory=1024"
        );
    }

    #[test]
    fn an_engine_named_by_info_finds_its_row() {
        assert!(!EngineKind::capabilities_of("dragonfly").forks_to_save);
        assert!(EngineKind::capabilities_of("valkey").answers_object_encoding);
        assert!(EngineKind::capabilities_of("keydb").forks_to_save);
    }
}
