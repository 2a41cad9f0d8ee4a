//! The `rdb` workload's commands: a thread reads the file with values and writes each key's
//! commands (by the rule of [`super::commands`]) into batches of about [`BATCH_BYTES`], handed
//! over a bounded channel to the load, which takes them one command at a time. The client
//! then holds a few batches and one element, whatever the file's size.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::RdbLoad;
use super::commands::{
    Chunker, Disposition, PASS_ORDER, carried_field_ttls, disposition, type_name, write_command,
};
use super::target::RdbTarget;
use crate::client::connection::resp::CommandBuffer;
use crate::rdb::{KeyEntry, KeyHead, KeyKind, LARGEST_ELEMENT_HELD, Part, StreamSummary};

/// A batch is handed over once it holds this many bytes.
const BATCH_BYTES: usize = 64 * 1024;
/// Batches the reader may be ahead of the load.
const BATCHES_AHEAD: usize = 8;

/// Commands, back to back, and where each ends.
struct Batch {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

/// What the reader thread sends: a batch, or why it stopped.
enum Handed {
    Batch(Batch),
    Failed(String),
}

/// The load's side: the next command on each call.
pub struct RdbEncoder {
    batches: Receiver<Handed>,
    current: Option<Batch>,
    next_command: usize,
    failure: Arc<Mutex<Option<String>>>,
    failed: bool,
    _reader: JoinHandle<()>,
}

impl RdbEncoder {
    pub fn new(load: &RdbLoad) -> Self {
        let (send, batches) = sync_channel(BATCHES_AHEAD);
        let path = load.path.clone();
        let reference_ms = load.reference_ms;
        let target = load.target.unwrap_or_default();
        let passes: Vec<KeyKind> = PASS_ORDER
            .iter()
            .filter(|kind| {
                load.scan
                    .passes
                    .iter()
                    .any(|p| p.key_type == type_name(kind))
            })
            .cloned()
            .collect();
        if let Ok(mut failure) = load.failure.lock() {
            *failure = None;
        }
        let reader = std::thread::spawn(move || {
            if let Err(message) = write_file(&path, reference_ms, target, &passes, send.clone()) {
                let _ = send.send(Handed::Failed(message));
            }
        });
        Self {
            batches,
            current: None,
            next_command: 0,
            failure: load.failure.clone(),
            failed: false,
            _reader: reader,
        }
    }

    /// Appends the next command. Once the reader has failed (or ended before the commands the
    /// scan counted), a PING stands for each command left and the failure is kept for the
    /// verification to report.
    pub fn encode_next(&mut self, out: &mut CommandBuffer) {
        loop {
            if !self.failed {
                if let Some(batch) = &self.current
                    && self.next_command < batch.ends.len()
                {
                    let start = match self.next_command {
                        0 => 0,
                        n => batch.ends[n - 1],
                    };
                    out.raw(&batch.bytes[start..batch.ends[self.next_command]]);
                    self.next_command += 1;
                    return;
                }
                match self.batches.recv() {
                    Ok(Handed::Batch(batch)) => {
                        self.current = Some(batch);
                        self.next_command = 0;
                        continue;
                    }
                    Ok(Handed::Failed(message)) => self.fail(message),
                    Err(_) => self.fail(
                        "the file ended before the commands its scan counted were written: it changed after the scan; load it again".into(),
                    ),
                }
            }
            out.array(1).bulk(b"PING");
            return;
        }
    }

    fn fail(&mut self, message: String) {
        self.failed = true;
        if let Ok(mut failure) = self.failure.lock() {
            failure.get_or_insert(message);
        }
    }
}

/// Writes the commands of one key as its elements arrive.
/// Starts `XGROUP subcommand key group` with `more` arguments to follow.
fn xgroup<'a>(
    out: &'a mut CommandBuffer,
    subcommand: &[u8],
    key: &[u8],
    group: &[u8],
    more: usize,
) -> &'a mut CommandBuffer {
    out.array(4 + more)
        .bulk(b"XGROUP")
        .bulk(subcommand)
        .bulk(key)
        .bulk(group)
}

struct KeyWriter {
    out: CommandBuffer,
    ends: Vec<usize>,
    db: u64,
    reference_ms: i64,
    /// The type this pass over the file writes.
    pass: KeyKind,
    /// What the engine's commands restore beyond the elements.
    target: RdbTarget,
    /// The key being read, once its first element (or its end) came.
    head: Option<KeyHead>,
    writing: bool,
    chunker: Chunker,
    /// The elements of the command being built, encoded, and how many.
    args: CommandBuffer,
    arg_count: usize,
    /// A sorted-set member waiting for its score (ZADD takes the score first).
    member: Vec<u8>,
    send: SyncSender<Handed>,
    /// The load hung up: the rest of the file is not worth reading.
    load_gone: bool,
}

impl KeyWriter {
    fn end_command(&mut self) {
        self.ends.push(self.out.as_bytes().len());
    }

    /// Appends the command under construction, if any.
    fn flush_elements(&mut self) {
        if self.arg_count == 0 {
            return;
        }
        let head = self
            .head
            .as_ref()
            .expect("elements come after their key's head");
        let kind = head.kind.as_ref().expect("only written keys have elements");
        self.out
            .array(2 + self.arg_count)
            .bulk(write_command(kind))
            .bulk(&head.name)
            .raw(self.args.as_bytes());
        self.end_command();
        self.args.clear();
        self.arg_count = 0;
    }

    fn begin_key(&mut self, head: &KeyHead) {
        self.writing = head.kind.as_ref() == Some(&self.pass)
            && disposition(head.kind.as_ref(), head.expire_at_ms, self.reference_ms)
                == Disposition::Write;
        self.head = Some(head.clone());
        self.chunker = Chunker::default();
        if self.writing && head.db != self.db {
            self.out.array(2).bulk(b"SELECT").bulk_decimal(head.db);
            self.end_command();
            self.db = head.db;
        }
    }

    fn element(&mut self, head: &KeyHead, part: Part, bytes: &[u8]) {
        if self.head.as_ref() != Some(head) {
            self.begin_key(head);
        }
        if !self.writing {
            return;
        }
        let kind = head.kind.as_ref().expect("a written key has a kind");
        if self.chunker.begins_command(kind, part, bytes.len() as u64) {
            self.flush_elements();
            // A large key's commands go as they are made, not at its end.
            self.hand_over(false);
        }
        match (kind, part) {
            (KeyKind::Zset, Part::Value) => {
                self.member.clear();
                self.member.extend_from_slice(bytes);
            }
            (KeyKind::Zset, _) => {
                self.args.bulk(bytes).bulk(&self.member);
                self.arg_count += 2;
            }
            // XADD's id, fields and values, and every other type's elements, in order.
            _ => {
                self.args.bulk(bytes);
                self.arg_count += 1;
            }
        }
    }

    fn end_key(&mut self, entry: &KeyEntry) {
        let head = KeyHead {
            db: entry.db,
            name: entry.name.clone(),
            kind: Some(entry.kind.clone()).filter(|k| !matches!(k, KeyKind::Module(_))),
            expire_at_ms: entry.expire_at_ms,
        };
        let stream = entry.stream.clone().unwrap_or_default();
        let empty_stream = entry.kind == KeyKind::Stream && entry.elements == 0;
        // Nothing recreates a stream with neither entries nor groups: skipped, as the scan
        // counted it (and with no SELECT for it).
        let skipped = empty_stream && stream.groups == 0;
        if self.head.as_ref() != Some(&head) {
            // A key with no element given: a module value, or a stream without entries.
            if skipped {
                self.writing = false;
            } else {
                self.begin_key(&head);
            }
        }
        if self.writing && !skipped {
            self.flush_elements();
            if entry.kind == KeyKind::Stream {
                self.stream_state(entry, &stream, empty_stream);
            }
            if self.target.field_expiry && carried_field_ttls(entry) > 0 {
                for expiry in &entry.field_expiries {
                    self.out
                        .array(6)
                        .bulk(b"HPEXPIREAT")
                        .bulk(&entry.name)
                        .bulk_decimal(expiry.at_ms.max(0) as u64)
                        .bulk(b"FIELDS")
                        .bulk(b"1")
                        .bulk(&expiry.field);
                    self.end_command();
                }
            }
            if let Some(at) = entry.expire_at_ms {
                self.out
                    .array(3)
                    .bulk(b"PEXPIREAT")
                    .bulk(&entry.name)
                    .bulk_decimal(at.max(0) as u64);
                self.end_command();
            }
        }
        self.args.clear();
        self.arg_count = 0;
        self.head = None;
    }

    /// A stream's state after its entries, in the order the engine needs it: its groups (the
    /// first creating an empty stream), its last id and counters (XSETID, once the stream
    /// exists), each group's entries read where the engine takes SETID's ENTRIESREAD (after the
    /// counters, from which the engine works out the group's lag), then each group's consumers
    /// and the entries pending for each, claimed with their delivery time and count (the
    /// entries must exist for XCLAIM to take them).
    fn stream_state(&mut self, entry: &KeyEntry, stream: &StreamSummary, empty_stream: bool) {
        let id = |(ms, seq): (u64, u64)| format!("{ms}-{seq}");
        for (i, group) in stream.group_starts.iter().enumerate() {
            let mkstream = empty_stream && i == 0;
            xgroup(
                &mut self.out,
                b"CREATE",
                &entry.name,
                &group.name,
                1 + usize::from(mkstream),
            )
            .bulk(id(group.last_delivered).as_bytes());
            if mkstream {
                self.out.bulk(b"MKSTREAM");
            }
            self.end_command();
        }
        match stream.counters.filter(|_| self.target.stream_counters) {
            Some(counters) => {
                self.out
                    .array(7)
                    .bulk(b"XSETID")
                    .bulk(&entry.name)
                    .bulk(id(stream.last_id).as_bytes())
                    .bulk(b"ENTRIESADDED")
                    .bulk_decimal(counters.entries_added)
                    .bulk(b"MAXDELETEDID")
                    .bulk(id(counters.max_deleted_id).as_bytes());
            }
            None => {
                self.out
                    .array(3)
                    .bulk(b"XSETID")
                    .bulk(&entry.name)
                    .bulk(id(stream.last_id).as_bytes());
            }
        }
        self.end_command();
        for group in &stream.group_starts {
            let Some(n) = group
                .entries_read
                .filter(|_| self.target.group_entries_read)
            else {
                continue;
            };
            xgroup(&mut self.out, b"SETID", &entry.name, &group.name, 3)
                .bulk(id(group.last_delivered).as_bytes())
                .bulk(b"ENTRIESREAD")
                .bulk(n.to_string().as_bytes());
            self.end_command();
        }
        for group in &stream.group_starts {
            for consumer in &group.consumers {
                xgroup(
                    &mut self.out,
                    b"CREATECONSUMER",
                    &entry.name,
                    &group.name,
                    1,
                )
                .bulk(&consumer.name);
                self.end_command();
                for pending in &consumer.pending {
                    // JUSTID leaves the delivery count as RETRYCOUNT sets it; TIME sets the
                    // delivery time the file kept, so XPENDING's idle time reads the same.
                    self.out
                        .array(12)
                        .bulk(b"XCLAIM")
                        .bulk(&entry.name)
                        .bulk(&group.name)
                        .bulk(&consumer.name)
                        .bulk(b"0")
                        .bulk(id(pending.id).as_bytes())
                        .bulk(b"TIME")
                        .bulk_decimal(pending.delivered_at_ms)
                        .bulk(b"RETRYCOUNT")
                        .bulk_decimal(pending.deliveries)
                        .bulk(b"FORCE")
                        .bulk(b"JUSTID");
                    self.end_command();
                }
            }
        }
    }

    /// Hands the commands written so far over, when they are a batch's worth (or `all`).
    fn hand_over(&mut self, all: bool) {
        if self.load_gone
            || self.ends.is_empty()
            || (!all && self.out.as_bytes().len() < BATCH_BYTES)
        {
            return;
        }
        let batch = Batch {
            bytes: self.out.as_bytes().to_vec(),
            ends: std::mem::take(&mut self.ends),
        };
        self.out.clear();
        // The load hung up (it stopped, or failed): nothing more to write.
        self.load_gone = self.send.send(Handed::Batch(batch)).is_err();
    }
}

/// Reads the file with values, once per type of `passes`, and hands its commands over, batch
/// by batch.
fn write_file(
    path: &str,
    reference_ms: i64,
    target: RdbTarget,
    passes: &[KeyKind],
    send: SyncSender<Handed>,
) -> Result<(), String> {
    let mut writer = KeyWriter {
        out: CommandBuffer::with_capacity(2 * BATCH_BYTES),
        ends: Vec::new(),
        db: 0,
        reference_ms,
        pass: KeyKind::String,
        target,
        head: None,
        writing: false,
        chunker: Chunker::default(),
        args: CommandBuffer::with_capacity(CHUNK_ARGS_CAPACITY),
        arg_count: 0,
        member: Vec::new(),
        send,
        load_gone: false,
    };
    for pass in passes {
        writer.pass = pass.clone();
        let mut reader = crate::rdb::open(std::path::Path::new(path))
            .map_err(|e| e.to_string())?
            .with_values(LARGEST_ELEMENT_HELD);
        while !writer.load_gone {
            let entry = reader
                .next_key_with_values(&mut |head, part, bytes| writer.element(head, part, bytes))
                .map_err(|e| e.to_string())?;
            let Some(entry) = entry else { break };
            writer.end_key(&entry);
            writer.hand_over(false);
        }
    }
    writer.hand_over(true);
    Ok(())
}

const CHUNK_ARGS_CAPACITY: usize = 64 * 1024;
