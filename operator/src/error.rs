//! The errors of measuring an engine. Each has a short static category, used as a metric label
//! and an event reason, and a message that says what went wrong and what to do. A leaf: it
//! names an engine by the address it is given (anything that displays as `host:port`), so the
//! client that holds the address type imports it, never the other way round.

use std::fmt::Display;

crate::words::open_words! {
    /// The bounded category of a failure: a metric label, an event reason, and the condition
    /// reason a client's error becomes. Serialized as the CamelCase word each has always been;
    /// a word this release does not know (a newer client's) reads as
    /// [`ErrorCategory::Unknown`], keeping the word.
    pub enum ErrorCategory {
        InvalidSpec = "InvalidSpec",
        InvalidPlan = "InvalidPlan",
        EngineUnreachable = "EngineUnreachable",
        AuthRequired = "AuthRequired",
        AuthenticationFailed = "AuthenticationFailed",
        ServerNotEmpty = "ServerNotEmpty",
        OutOfMemory = "OutOfMemory",
        EngineRejected = "EngineRejected",
        ConnectionLost = "ConnectionLost",
        SlotMoved = "SlotMoved",
        CountMismatch = "CountMismatch",
        TtlTooShort = "TtlTooShort",
        Stopped = "Stopped",
        OtherClientsConnected = "OtherClientsConnected",
        ProtocolError = "ProtocolError",
        EngineStartFailed = "EngineStartFailed",
        SourceUnavailable = "SourceUnavailable",
    }
    unknown_meaning = "A category this release does not know, written by a newer client.\n";
}

impl ErrorCategory {
    /// Whether another client is worth starting: the engine could not be reached or the
    /// connection broke while the engine stayed up, the client was stopped by someone else
    /// (its pod evicted or deleted) while its engine is fine, or the server of an RDB file's
    /// URL failed for a while (a 5xx, a broken download). An engine that refuses data
    /// (maxmemory, a failed count check) would refuse it again; an unknown category is not
    /// retried, so a newer client's failure is reported, not repeated.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ErrorCategory::EngineUnreachable
                | ErrorCategory::ConnectionLost
                | ErrorCategory::ProtocolError
                | ErrorCategory::Stopped
                | ErrorCategory::SourceUnavailable
        )
    }
}

/// What stopped a run early, which says how to describe it and which exit code reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopCause {
    /// SIGINT: Ctrl-C at a terminal.
    Interrupt,
    /// SIGTERM outside a pod: `timeout`, `kill`, a service manager.
    Terminate,
    /// SIGTERM in a client pod: the pod is being deleted.
    PodDeleted,
}

impl StopCause {
    pub fn signal_name(self) -> &'static str {
        match self {
            StopCause::Interrupt => "SIGINT",
            StopCause::Terminate | StopCause::PodDeleted => "SIGTERM",
        }
    }

    fn why(self) -> &'static str {
        match self {
            StopCause::Interrupt => "Ctrl-C",
            StopCause::Terminate => "asked to stop: `timeout`, `kill` or a service manager",
            StopCause::PodDeleted => {
                "the pod is being deleted: the benchmark's timeout, an eviction, or the loss of its engine"
            }
        }
    }

    /// The exit code of a run stopped this way: 128 + the signal's number, as a shell reports
    /// a program the signal ended.
    pub fn exit_code(self) -> u8 {
        match self {
            StopCause::Interrupt => ExitStatus::Interrupted.code(),
            StopCause::Terminate | StopCause::PodDeleted => ExitStatus::Terminated.code(),
        }
    }
}

/// Declares the exit statuses once, with their codes and docs: the enum, `ALL`, `code` and
/// `meaning` cannot disagree, and the doc comment is the text `--help` and the book show.
macro_rules! exit_statuses {
    ($($(#[doc = $doc:literal])* $name:ident = $code:literal,)*) => {
        /// What the exit code of a `membench` command says. The one table of them: the binary
        /// exits with these, `--help` lists them ([`ExitStatus::help_text`]) and the book's
        /// exit-codes page is generated from the variants' docs.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum ExitStatus {
            $($(#[doc = $doc])* $name,)*
        }

        impl ExitStatus {
            /// Every status, in the order of their codes.
            pub const ALL: &'static [ExitStatus] = &[$(ExitStatus::$name,)*];

            /// The process's exit code.
            pub fn code(self) -> u8 {
                match self {
                    $(ExitStatus::$name => $code,)*
                }
            }

            /// What the code means and what to do: the variant's doc comment, as written
            /// (its line breaks are the comment's own wrapping).
            pub fn meaning(self) -> &'static str {
                match self {
                    $(ExitStatus::$name => concat!($($doc, "\n",)*),)*
                }
            }
        }
    };
}

exit_statuses! {
    /// Everything asked for was measured (or printed).
    Success = 0,
    /// A measurement failed or its result could not be written: what was measured is still
    /// printed and written (`--result-file`), with the error. Also a server that cannot be
    /// reached or refuses the password (`load` and `profile` alike). Read the error's
    /// `category` in the result, or the message on stderr.
    Failed = 1,
    /// Bad input: a flag, a spec, or a server membench refuses to touch (one that holds data).
    /// Nothing was measured. The message on stderr names what is wrong: fix it and run again.
    BadInput = 2,
    /// Stopped by SIGINT (Ctrl-C): the finished repetitions are printed and written, with
    /// `error.category` `Stopped`, and every engine membench started is stopped. 128 + the
    /// signal's number, as a shell reports a program the signal ended.
    Interrupted = 130,
    /// Stopped by SIGTERM (`kill`, a pod's deletion), the same as SIGINT. Under `timeout`,
    /// `timeout` itself exits 124.
    Terminated = 143,
}

impl ExitStatus {
    /// The list `--help` ends with: each code and its meaning, wrapped under the code.
    pub fn help_text() -> String {
        let mut text = String::from("Exit codes:\n");
        for status in ExitStatus::ALL {
            let mut line = format!("  {:<5}", status.code());
            let mut width = line.len();
            for word in status.meaning().split_whitespace() {
                if width + word.len() + 1 > 95 {
                    text.push_str(line.trim_end());
                    text.push('\n');
                    line = " ".repeat(7);
                    width = line.len();
                }
                if !line.ends_with(' ') {
                    line.push(' ');
                    width += 1;
                }
                line.push_str(word);
                width += word.len();
            }
            text.push_str(line.trim_end());
            text.push('\n');
        }
        text.trim_end().to_string()
    }
}

impl From<ExitStatus> for std::process::ExitCode {
    fn from(status: ExitStatus) -> Self {
        std::process::ExitCode::from(status.code())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("invalid {field}: {message}")]
    InvalidArgument { field: String, message: String },

    /// A run plan the client cannot run (`client::measurement::plan`): one that does not parse, or one of a
    /// newer format than this client reads. `field` is the plan's field, as its JSON names it.
    #[error("the run plan's {field} {message}")]
    InvalidPlan { field: String, message: String },

    #[error(
        "cannot reach the engine at {address}: {detail}. Check that the server runs and listens there"
    )]
    EngineUnreachable { address: String, detail: String },

    #[error(
        "the engine at {address} requires a password: pass --password (or set MEMBENCH_PASSWORD)"
    )]
    AuthRequired { address: String },

    #[error(
        "the engine at {address} refused the password: check --password (or MEMBENCH_PASSWORD) against the server's requirepass, or the password of its ACL user"
    )]
    AuthenticationFailed { address: String },

    #[error(
        "the server at {address} is not empty: it holds {keys} key(s) that membench did not write, and a benchmark starts with FLUSHALL. Point membench at a server that holds nothing you need, or pass --flush to empty it (every database) first"
    )]
    ServerNotEmpty { address: String, keys: u64 },

    #[error(
        "the engine ran out of memory after {items_sent} items: {message}. Raise maxmemory (or the pod's memory limit) or load fewer items"
    )]
    OutOfMemory { message: String, items_sent: u64 },

    #[error("the engine rejected {command}: {message}")]
    EngineRejected { command: String, message: String },

    #[error(
        "the engine closed the connection after {items_sent} items (did it crash or get killed?): {detail}"
    )]
    ConnectionLost { items_sent: u64, detail: String },

    #[error(
        "{shard} answered {redirection} for slot {slot} (to {target}) during the load: the slot is not where membench joined it, so the cluster's slots moved (a resharding, a failover) or another client changed them. The slots must stay put during a benchmark: give membench cluster-mode nodes that nothing else reshards"
    )]
    SlotMoved {
        /// `MOVED` or `ASK`.
        redirection: String,
        slot: u16,
        /// The shard that answered, as `shard I (HOST:PORT)`.
        shard: String,
        /// Where the reply sent the key.
        target: String,
    },

    #[error("count check failed: {message}")]
    CountMismatch { message: String },

    #[error(
        "the TTL of {ttl_seconds} s is too short: this repetition's load and readings took {elapsed_seconds:.0} s from its first write, so its first keys could expire before the final reading and the figure would count fewer than were written; raise ttlSeconds (--ttl-seconds) well above that"
    )]
    TtlTooShort {
        ttl_seconds: u32,
        elapsed_seconds: f64,
    },

    #[error(
        "stopped by {} ({}) after {items_sent} items of the running repetition; the finished repetitions are kept",
        cause.signal_name(),
        cause.why()
    )]
    Stopped { items_sent: u64, cause: StopCause },

    #[error(
        "{count} other client(s) stayed connected to the engine at {address} for {waited_seconds:.1} s before the {reading} memory reading, and their buffers would count as data: {clients}. Stop them (a monitoring agent, another benchmark), or wait longer with --other-clients-timeout"
    )]
    OtherClientsConnected {
        address: String,
        count: u64,
        waited_seconds: f64,
        /// `baseline` or `final`.
        reading: &'static str,
        clients: String,
    },

    #[error("unexpected reply from the engine: {0}")]
    Protocol(String),

    #[error("{0}")]
    EngineStart(String),

    /// The workload's data could not be had for a while: the server of an RDB file's URL
    /// failed (a 5xx answer, a connection or download broken off). Worth another attempt.
    #[error("the workload's file could not be fetched: {message}")]
    SourceUnavailable { message: String },
}

impl BenchError {
    /// The failure's bounded category.
    pub fn kind(&self) -> ErrorCategory {
        match self {
            BenchError::InvalidArgument { .. } => ErrorCategory::InvalidSpec,
            BenchError::InvalidPlan { .. } => ErrorCategory::InvalidPlan,
            BenchError::EngineUnreachable { .. } => ErrorCategory::EngineUnreachable,
            BenchError::AuthRequired { .. } => ErrorCategory::AuthRequired,
            BenchError::AuthenticationFailed { .. } => ErrorCategory::AuthenticationFailed,
            BenchError::ServerNotEmpty { .. } => ErrorCategory::ServerNotEmpty,
            BenchError::OutOfMemory { .. } => ErrorCategory::OutOfMemory,
            BenchError::EngineRejected { .. } => ErrorCategory::EngineRejected,
            BenchError::ConnectionLost { .. } => ErrorCategory::ConnectionLost,
            BenchError::SlotMoved { .. } => ErrorCategory::SlotMoved,
            BenchError::CountMismatch { .. } => ErrorCategory::CountMismatch,
            BenchError::TtlTooShort { .. } => ErrorCategory::TtlTooShort,
            BenchError::Stopped { .. } => ErrorCategory::Stopped,
            BenchError::OtherClientsConnected { .. } => ErrorCategory::OtherClientsConnected,
            BenchError::Protocol(_) => ErrorCategory::ProtocolError,
            BenchError::EngineStart(_) => ErrorCategory::EngineStartFailed,
            BenchError::SourceUnavailable { .. } => ErrorCategory::SourceUnavailable,
        }
    }

    /// A short, bounded category for metric labels and event reasons.
    pub fn category(&self) -> &'static str {
        self.kind().label()
    }

    /// The same failure, as seen once the engine had answered: an engine that cannot be
    /// reached any more went away (it crashed, was killed or lost its pod) while this client
    /// measured it, which is a lost connection, with what was sent, rather than an address to
    /// check.
    pub fn after_connected(self, items_sent: u64) -> Self {
        match self {
            BenchError::EngineUnreachable { detail, .. } => {
                BenchError::ConnectionLost { items_sent, detail }
            }
            other => other,
        }
    }

    /// Classifies an error from the `redis` crate (control connection).
    pub fn from_redis(address: &impl Display, e: redis::RedisError) -> Self {
        let text = e.to_string();
        if text.contains("WRONGPASS") || e.kind() == redis::ErrorKind::AuthenticationFailed {
            return BenchError::AuthenticationFailed {
                address: address.to_string(),
            };
        }
        if text.contains("NOAUTH")
            || text.contains("WRONGPASS")
            || text.contains("Authentication required")
        {
            return BenchError::AuthRequired {
                address: address.to_string(),
            };
        }
        if e.is_io_error() || e.is_connection_refusal() || e.is_timeout() {
            return BenchError::EngineUnreachable {
                address: address.to_string(),
                detail: text,
            };
        }
        if let Some(code) = e.code() {
            let dragonfly_oom =
                code == "ERR" && e.detail().is_some_and(|d| d.starts_with("Out of memory"));
            if code == "OOM" || dragonfly_oom {
                return BenchError::OutOfMemory {
                    message: text,
                    items_sent: 0,
                };
            }
            return BenchError::EngineRejected {
                command: "a control command".into(),
                message: text,
            };
        }
        BenchError::Protocol(text)
    }

    /// Classifies an error reply received during the load.
    ///
    /// An engine at its `maxmemory` refuses writes: Redis and Valkey with `-OOM command not
    /// allowed when used memory > 'maxmemory'`, Dragonfly with `-ERR Out of memory` (seen with
    /// 1.40.0 at the `--maxmemory` its pod is given).
    pub fn from_load_reply(
        command: &str,
        reply: String,
        items_sent: u64,
        address: &impl Display,
    ) -> Self {
        if is_out_of_memory(&reply) {
            BenchError::OutOfMemory {
                message: reply,
                items_sent,
            }
        } else if reply.starts_with("WRONGPASS") {
            BenchError::AuthenticationFailed {
                address: address.to_string(),
            }
        } else if reply.starts_with("NOAUTH") {
            BenchError::AuthRequired {
                address: address.to_string(),
            }
        } else {
            BenchError::EngineRejected {
                command: command.to_string(),
                message: reply,
            }
        }
    }
}

/// Whether an error reply says the engine is at its memory limit (see
/// [`BenchError::from_load_reply`]).
pub fn is_out_of_memory(reply: &str) -> bool {
    let reply = reply.trim_start_matches('-');
    reply.starts_with("OOM") || reply.starts_with("ERR Out of memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engines_refusal_at_its_maxmemory_is_out_of_memory() {
        let address = "127.0.0.1:6379";
        for reply in [
            "OOM command not allowed when used memory > 'maxmemory'.",
            "ERR Out of memory",
        ] {
            let error = BenchError::from_load_reply("SET", reply.to_string(), 7, &address);
            assert!(
                matches!(error, BenchError::OutOfMemory { items_sent: 7, .. }),
                "{reply}: {error:?}"
            );
        }
        let other = BenchError::from_load_reply("SET", "ERR syntax error".into(), 7, &address);
        assert!(
            matches!(other, BenchError::EngineRejected { .. }),
            "{other:?}"
        );
    }
}
