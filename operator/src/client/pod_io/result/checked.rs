//! Reading a termination message the operator did not write: whatever a client pod leaves
//! there (or whoever forged it) is held to what the spec asked for before any of it reaches the
//! status. Nothing in a message decides how much the operator allocates: the message itself is
//! capped at the kubelet's 4096 bytes, the repetitions at `spec.repetitions` (itself at most
//! 100), every column at one value or exactly that many, every string at a few hundred bytes.
//! Numbers are finite, counts positive, and every sum is checked, so no message can make the
//! operator panic or overflow.

use super::{
    ClientResult, DecodedRepetition, MAX_MODULES, MAX_TEXT, TERMINATION_MESSAGE_LIMIT,
    WHOLE_RESULT_LIMIT,
};
use crate::client::measurement::measured::PeakRatio;
use crate::crd::engine_settings::MAX_CONFIG_SETTINGS;
use crate::stats::Spread;

/// How much of a refused message the engine's status quotes.
pub const QUOTED_BYTES: usize = 200;

/// The longest engine name, version, allocator, arch or encoding a result may carry.
const MAX_IDENTITY: usize = 64;

/// The most warnings a client sends (`ClientResult::from_report` keeps three).
const MAX_WARNINGS: usize = 3;

/// Why a termination message was not taken as a client's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The client left nothing, or something that is not meant as a result (its last log
    /// lines, kept by `FallbackToLogsOnError`): a client that failed, worth another attempt.
    NoResult(String),
    /// A message shaped as a result that breaks its bounds: a broken or forged client. Another
    /// attempt would read the same, so the engine fails as `InvalidClientResult`.
    Invalid(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::NoResult(why) | ReadError::Invalid(why) => f.write_str(why),
        }
    }
}

/// The first [`QUOTED_BYTES`] bytes of `text`, cut at a character boundary, with control
/// characters shown escaped so that a quote cannot break a log line or a status message.
pub fn quote(text: &str) -> String {
    let mut end = text.len().min(QUOTED_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let quoted: String = text[..end]
        .chars()
        .flat_map(|c| {
            let escaped = c.is_control().then(|| c.escape_default());
            escaped
                .into_iter()
                .flatten()
                .chain((!c.is_control()).then_some(c))
        })
        .collect();
    if end < text.len() {
        format!("{quoted}…")
    } else {
        quoted
    }
}

/// Where a result was read from: the two differ only in how large it may be.
#[derive(Clone, Copy)]
enum Source {
    TerminationMessage,
    Endpoint,
}

impl ClientResult {
    /// Reads the termination message of a client that was asked for `repetitions`
    /// repetitions, holding it to the bounds in the module documentation.
    pub fn read(message: &str, repetitions: u32) -> Result<Self, ReadError> {
        Self::read_from(message, repetitions, Source::TerminationMessage)
    }

    /// Reads the whole result a client serves on its progress endpoint, held to the same
    /// bounds as a termination message but for its size: at most [`WHOLE_RESULT_LIMIT`] bytes.
    pub fn read_whole(body: &str, repetitions: u32) -> Result<Self, ReadError> {
        Self::read_from(body, repetitions, Source::Endpoint)
    }

    fn read_from(message: &str, repetitions: u32, source: Source) -> Result<Self, ReadError> {
        let (what, limit) = match source {
            Source::TerminationMessage => ("termination message", TERMINATION_MESSAGE_LIMIT),
            Source::Endpoint => ("served result", WHOLE_RESULT_LIMIT),
        };
        let trimmed = message.trim();
        if trimmed.is_empty() {
            return Err(ReadError::NoResult(format!(
                "the client left no result (empty {what})"
            )));
        }
        if !trimmed.starts_with('{') {
            return Err(ReadError::NoResult(format!(
                "the client's {what} is not a membench result: {}",
                quote(trimmed)
            )));
        }
        let began = match source {
            Source::TerminationMessage => "the message began",
            Source::Endpoint => "the served result began",
        };
        let invalid =
            |why: String| ReadError::Invalid(format!("{why}; {began}: {}", quote(trimmed)));
        if message.len() > limit {
            let holder = match source {
                Source::TerminationMessage => "a termination message holds",
                Source::Endpoint => "a served result may have",
            };
            return Err(invalid(format!(
                "the result has {} bytes, more than {holder} ({limit})",
                message.len()
            )));
        }
        let result: ClientResult = serde_json::from_str(trimmed).map_err(|e| {
            invalid(format!(
                "the result is not valid JSON of a membench result ({e})"
            ))
        })?;
        result.check(repetitions).map_err(invalid)?;
        Ok(result)
    }

    /// Whether the result stays within what a client asked for `repetitions` repetitions can
    /// send; the error says which bound it broke.
    pub fn check(&self, repetitions: u32) -> Result<(), String> {
        let identity = [
            ("engine.name", &self.engine.name),
            ("engine.version", &self.engine.version),
            ("engine.allocator", &self.engine.allocator),
            ("engine.arch", &self.engine.arch),
        ];
        for (field, value) in identity {
            bounded_text(field, value, MAX_IDENTITY)?;
        }
        if let Some(io) = &self.engine.io {
            bounded_text("engine.io", io, MAX_IDENTITY)?;
        }
        if let Some(encoding) = &self.encoding {
            bounded_text("encoding", encoding, MAX_IDENTITY)?;
        }
        let settings = self.engine.config.len() + self.engine.config_unreported.len();
        if settings > 2 * MAX_CONFIG_SETTINGS {
            return Err(format!(
                "engine.config has {settings} settings, more than the {} a client sends",
                2 * MAX_CONFIG_SETTINGS
            ));
        }
        let setting_texts = self
            .engine
            .config
            .iter()
            .flat_map(|(name, value)| [name, value])
            .chain(&self.engine.config_unreported);
        for text in setting_texts {
            bounded_text(
                "an engine.config setting",
                text,
                MAX_IDENTITY + '…'.len_utf8(),
            )?;
        }
        let modules = self.engine.modules.as_deref().unwrap_or_default();
        if modules.len() > MAX_MODULES {
            return Err(format!(
                "engine.modules has {} modules, more than the {MAX_MODULES} a client sends",
                modules.len()
            ));
        }
        for module in modules {
            bounded_text(
                "an engine.modules name",
                &module.name,
                MAX_IDENTITY + '…'.len_utf8(),
            )?;
            bounded_text(
                "an engine.modules version",
                &module.version,
                MAX_IDENTITY + '…'.len_utf8(),
            )?;
        }
        if let Some(cluster) = &self.engine.cluster {
            bounded_text(
                "engine.cluster.state",
                &cluster.state,
                MAX_IDENTITY + '…'.len_utf8(),
            )?;
        }
        if self.warnings.len() > MAX_WARNINGS {
            return Err(format!(
                "{} warnings, more than the {MAX_WARNINGS} a client sends",
                self.warnings.len()
            ));
        }
        for warning in &self.warnings {
            bounded_text("a warning", warning, MAX_TEXT + '…'.len_utf8())?;
        }
        if let Some(error) = &self.error {
            bounded_text("error.message", &error.message, MAX_TEXT + '…'.len_utf8())?;
            // A newer client's category is kept as its word, and becomes the engine's reason
            // and the conditions' (which the API server takes only as a CamelCase word);
            // a phase's name is quoted in the status. Anything else is a broken or forged
            // client.
            checked_word(
                "error.category",
                error.category.as_str(),
                char::is_ascii_uppercase,
            )?;
            if let Some(phase) = &error.phase {
                checked_word(
                    "error.phase.name",
                    phase.name.as_str(),
                    char::is_ascii_lowercase,
                )?;
            }
        }
        let columns = &self.repetitions;
        let listed = columns.n;
        let accounted = listed.checked_add(self.omitted);
        if accounted.is_none_or(|total| total > repetitions) {
            return Err(format!(
                "{listed} repetitions listed and {} omitted, more than the {repetitions} asked for",
                self.omitted
            ));
        }
        if let Some(shards) = &self.shards {
            shards.check()?;
        }
        if self.summary.as_ref().is_some_and(|s| s.shards.is_some()) {
            return Err("summary.shards: a client sends the shards' figures in shards".into());
        }
        let decoded = self.checked_repetitions(repetitions)?;
        if self.commands == 0 && !decoded.is_empty() {
            return Err("repetitions without a single command sent".into());
        }
        if let Some(failed) = &self.failed
            && (failed.repetition == 0 || failed.repetition > repetitions)
        {
            return Err(format!(
                "failed.repetition is {}, not one of the {repetitions} asked for",
                failed.repetition
            ));
        }
        if let Some(summary) = &self.summary {
            if summary.repetitions == 0 || summary.repetitions > repetitions {
                return Err(format!(
                    "the summary covers {} repetitions, not 1 to the {repetitions} asked for",
                    summary.repetitions
                ));
            }
            if summary.items == 0 {
                return Err("the summary counts 0 items".into());
            }
            if self.commands == 0 {
                return Err("a summary without a single command sent".into());
            }
            let spreads = [
                ("summary.used_memory", Some(&summary.used_memory)),
                ("summary.bytes_per_item", Some(&summary.bytes_per_item)),
                ("summary.commands_per_sec", Some(&summary.commands_per_sec)),
                ("summary.items_per_sec", summary.items_per_sec.as_ref()),
                (
                    "summary.settled_bytes_per_item",
                    summary.settled_bytes_per_item.as_ref(),
                ),
            ];
            for (field, spread) in spreads {
                if let Some(spread) = spread {
                    finite_spread(field, spread)?;
                }
            }
            if let Some(reason) = &summary.unstable_reason {
                bounded_text("summary.unstable_reason", reason, MAX_TEXT + '…'.len_utf8())?;
            }
            check_by_type(&summary.by_type)?;
            if let Some(snapshot) = summary.peak.as_ref().and_then(|p| p.snapshot.as_ref()) {
                check_peak_ratio("summary.peak.snapshot", snapshot, repetitions)?;
            }
            if let Some(replica) = summary.peak.as_ref().and_then(|p| p.replica.as_ref()) {
                check_peak_ratio("summary.peak.replica", replica, repetitions)?;
            }
        }
        Ok(())
    }

    /// The listed repetitions, each column one value or exactly `n` long, every value decoded
    /// with checked arithmetic, counts positive and sizes not negative.
    fn checked_repetitions(&self, repetitions: u32) -> Result<Vec<DecodedRepetition>, String> {
        let columns = &self.repetitions;
        let n = columns.n as usize;
        if n == 0 {
            return Ok(Vec::new());
        }
        if columns.n > repetitions {
            return Err(format!(
                "{n} repetitions listed, more than the {repetitions} asked for"
            ));
        }
        let required = |name: &str, column: &[i64]| -> Result<Vec<i64>, String> {
            checked_column(name, column, n)?.ok_or_else(|| format!("column {name} is missing"))
        };
        let baseline = required("baseline", &columns.baseline)?;
        let used = required("used", &columns.used)?;
        let rss = required("rss", &columns.rss)?;
        let items = required("items", &columns.items)?;
        let micros = required("micros", &columns.micros)?;
        let settled = checked_column("settled", &columns.settled, n)?;
        let dataset = checked_column("dataset", &columns.dataset, n)?;
        let frag = checked_column("frag", &columns.frag, n)?;
        let not_negative = |name: &str, values: &[i64]| match values.iter().find(|v| **v < 0) {
            Some(v) => Err(format!("column {name} holds the negative value {v}")),
            None => Ok(()),
        };
        for (name, values) in [
            ("baseline", &baseline),
            ("used", &used),
            ("rss", &rss),
            ("micros", &micros),
        ] {
            not_negative(name, values)?;
        }
        for (name, values) in [
            ("settled", &settled),
            ("dataset", &dataset),
            ("frag", &frag),
        ] {
            if let Some(values) = values {
                not_negative(name, values)?;
            }
        }
        if let Some(zero) = items.iter().find(|v| **v <= 0) {
            return Err(format!(
                "column items holds {zero}: every repetition stores items"
            ));
        }
        Ok(self.decoded_repetitions())
    }
}

/// A column of `n` repetitions: `None` when it is empty (an optional column left out), its
/// values when it is one value or exactly `n` long, an error otherwise or when a difference
/// overflows.
fn checked_column(name: &str, column: &[i64], n: usize) -> Result<Option<Vec<i64>>, String> {
    match column {
        [] => Ok(None),
        [only] => Ok(Some(vec![*only; n])),
        [first, differences @ ..] if column.len() == n => {
            let mut values = Vec::with_capacity(n);
            values.push(*first);
            for d in differences {
                values.push(first.checked_add(*d).ok_or_else(|| {
                    format!("column {name}: {first} + {d} overflows a 64-bit integer")
                })?);
            }
            Ok(Some(values))
        }
        _ => Err(format!(
            "column {name} has {} values: it must have 1 or exactly {n}",
            column.len()
        )),
    }
}

/// A word a client sends: at most [`MAX_IDENTITY`] ASCII letters and digits, the first of the
/// case `first` accepts.
fn checked_word(field: &str, word: &str, first: fn(&char) -> bool) -> Result<(), String> {
    bounded_text(field, word, MAX_IDENTITY)?;
    let mut chars = word.chars();
    if !chars.next().is_some_and(|c| first(&c)) || !chars.all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "{field} {:?} is not a word a client sends (ASCII letters and digits, as `ConnectionLost` or `snapshot`)",
            quote(word)
        ));
    }
    Ok(())
}

fn bounded_text(field: &str, value: &str, max: usize) -> Result<(), String> {
    if value.len() > max {
        return Err(format!(
            "{field} has {} bytes, more than the {max} a client sends",
            value.len()
        ));
    }
    Ok(())
}

/// A rebuild's bytes per key by type: each a type a profile knows, once, with keys and a
/// finite figure.
fn check_by_type(
    types: &[crate::client::workloads::type_memory::TypeSummary],
) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for t in types {
        if crate::profile::model::KeyType::from_type_reply(&t.key_type).is_none() {
            return Err(format!(
                "summary.by_type names the type '{}', which no profile holds",
                t.key_type.chars().take(32).collect::<String>()
            ));
        }
        if !seen.insert(t.key_type.as_str()) {
            return Err(format!("summary.by_type lists {} twice", t.key_type));
        }
        if t.keys == 0 || !t.bytes_per_key.is_finite() {
            return Err(format!(
                "summary.by_type {} has no keys or a figure that is not finite",
                t.key_type
            ));
        }
    }
    Ok(())
}

/// A peak over steady memory: finite, positive, its median between its lowest and highest, over
/// 1 to `repetitions` repetitions.
fn check_peak_ratio(field: &str, peak: &PeakRatio, repetitions: u32) -> Result<(), String> {
    let figures = [peak.ratio, peak.min, peak.max];
    if !figures.iter().all(|f| f.is_finite() && *f > 0.0) {
        return Err(format!(
            "{field} holds a ratio that is not a positive number"
        ));
    }
    if !(peak.min <= peak.ratio && peak.ratio <= peak.max) {
        return Err(format!(
            "{field}: the median {} is not between the lowest {} and the highest {}",
            peak.ratio, peak.min, peak.max
        ));
    }
    if peak.repetitions == 0 || peak.repetitions > repetitions {
        return Err(format!(
            "{field} covers {} repetitions, not 1 to the {repetitions} asked for",
            peak.repetitions
        ));
    }
    Ok(())
}

fn finite_spread(field: &str, spread: &Spread) -> Result<(), String> {
    let figures = [spread.median, spread.min, spread.max, spread.cv];
    if figures.iter().all(|f| f.is_finite()) {
        Ok(())
    } else {
        Err(format!("{field} holds a number that is not finite"))
    }
}

#[cfg(test)]
#[path = "checked_tests.rs"]
mod tests;
