//! The files a Dragonfly save leaves behind, removed when the engine runs on this machine.
//!
//! Dragonfly writes every `SAVE` as new files in its `dir`: `<name>-summary.dfs` and one
//! `<name>-NNNN.dfs` per shard, where `<name>` is its `dbfilename` with `{timestamp}` filled in
//! (its default, `dump-{timestamp}`, makes new files at every save). The snapshot phase saves
//! once per repetition, so a run against a user's own Dragonfly would leave a snapshot of the
//! benchmark's data per repetition in the user's directory. Redis and Valkey write their one
//! configured `dbfilename` in place, as their own saves do, and are left alone.
//!
//! Only files that did not exist before the save, whose names begin with the save's
//! `dbfilename` (up to any `{`) and end in `.dfs` or `.rdb`, are removed, and only when the
//! engine's process is on this machine (its `dir` relative to its own working directory, as
//! Dragonfly reads it). An engine elsewhere keeps its files: its host's to remove.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::client::connection::engine::ControlConnection;
use crate::client::measurement::process_tree;

/// A Dragonfly's snapshot directory and what it held before a save.
pub struct SaveFiles {
    dir: PathBuf,
    prefix: String,
    before: BTreeSet<String>,
}

impl SaveFiles {
    /// Reads the directory of the Dragonfly whose INFO says `process_id`, when that process
    /// runs on this machine; None otherwise (or when the engine does not say where it saves).
    pub fn before_save(control: &mut ControlConnection, process_id: Option<u32>) -> Option<Self> {
        let pid = process_tree::local_engine(process_id?)?;
        let setting = |control: &mut ControlConnection, name: &str| -> Option<String> {
            let pair: Vec<String> = control
                .query(redis::cmd("CONFIG").arg("GET").arg(name))
                .ok()?;
            pair.into_iter().nth(1)
        };
        let dir = setting(control, "dir")?;
        let name = setting(control, "dbfilename")?;
        let prefix = name.split('{').next().unwrap_or_default().to_string();
        if prefix.is_empty() {
            return None;
        }
        let dir = Path::new(&dir);
        let dir = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::fs::read_link(format!("/proc/{pid}/cwd"))
                .ok()?
                .join(dir)
        };
        let before = snapshot_names(&dir, &prefix)?;
        Some(Self {
            dir,
            prefix,
            before,
        })
    }

    /// Removes the snapshot files the save made; returns those it could not remove, with why.
    pub fn remove_new(&self) -> Vec<String> {
        let Some(after) = snapshot_names(&self.dir, &self.prefix) else {
            return Vec::new();
        };
        after
            .difference(&self.before)
            .filter_map(|name| {
                let path = self.dir.join(name);
                std::fs::remove_file(&path)
                    .err()
                    .map(|e| format!("{}: {e}", path.display()))
            })
            .collect()
    }
}

/// The names in `dir` that a save with this `prefix` writes.
fn snapshot_names(dir: &Path, prefix: &str) -> Option<BTreeSet<String>> {
    let names = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| {
            name.starts_with(prefix) && (name.ends_with(".dfs") || name.ends_with(".rdb"))
        })
        .collect();
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_saves_own_kind_of_file_is_a_snapshot() {
        let dir = std::env::temp_dir().join(format!("membench-save-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            "dump-1-summary.dfs",
            "dump-1-0000.dfs",
            "dump.rdb",
            "dump-notes.txt",
            "other-summary.dfs",
        ] {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
        let names = snapshot_names(&dir, "dump-").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            ["dump-1-0000.dfs", "dump-1-summary.dfs"]
        );
    }
}
