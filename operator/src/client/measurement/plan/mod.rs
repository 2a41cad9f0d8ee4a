//! The run plan: every setting one engine's run needs (the workload, the pipeline, the
//! repetitions, the readings, the phases after them), as data and nothing else. It is built
//! once per engine entry from a spec (`validation::run_plan`) or from `membench load`'s flags,
//! and the local runner, `membench load` and the client pod all run from it: the operator
//! hands it to the client pod as one JSON document ([`PLAN_ENV`]), so what `membench run` and
//! the operator measure cannot drift apart by a flag. What a run needs that is not a setting
//! (the engines' addresses, the stop request, who reads the engine's container) is passed
//! beside it (`client::measurement::load_options::LoadOptions`).
//!
//! A plan carries its format ([`PLAN_FORMAT`]): a client refuses a plan of a newer format,
//! naming both, and a plan that does not parse, naming the field ([`RunPlan::from_json`]).

mod json_path;
mod settings;
mod workload_plan;

use serde::{Deserialize, Serialize};

pub use settings::{DEFAULT_OTHER_CLIENTS_TIMEOUT, RunSettings};
pub use workload_plan::WorkloadPlan;

use crate::error::BenchError;

/// The plan format this membench writes and reads. Raise it when a plan gains a field or a
/// field changes meaning: a client of an older format then refuses the plan, naming both,
/// instead of running without the setting it does not know.
pub const PLAN_FORMAT: u32 = 1;

/// The environment variable a client pod finds its plan in (JSON), when `membench load` has
/// no `--plan FILE`.
pub const PLAN_ENV: &str = "MEMBENCH_PLAN";

/// The membench that writes a plan, named in a refusal.
pub const MEMBENCH_VERSION: &str = env!("CARGO_PKG_VERSION");

/// One engine's run, as data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPlan {
    /// [`PLAN_FORMAT`] of the membench that wrote it.
    pub format: u32,
    /// The version of the membench that wrote it, for the messages of a client that refuses it.
    pub written_by: String,
    /// What to load.
    pub workload: WorkloadPlan,
    /// How to load it, measure it, and the phases after the readings.
    pub settings: RunSettings,
}

impl RunPlan {
    /// A plan of this membench's format.
    pub fn new(workload: WorkloadPlan, settings: RunSettings) -> Self {
        Self {
            format: PLAN_FORMAT,
            written_by: MEMBENCH_VERSION.to_string(),
            workload,
            settings,
        }
    }

    /// The plan as the client pod receives it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a run plan always serializes")
    }

    /// The plan as `membench run --print-plan` prints it: the same document, indented.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a run plan always serializes")
    }

    /// Reads a plan. A plan of a newer format than [`PLAN_FORMAT`] is refused naming both
    /// formats and both membench versions (its settings may mean what this client cannot do);
    /// one that does not parse is refused naming the field, then what is wrong with it; one
    /// whose settings are out of range, naming the setting.
    pub fn from_json(text: &str) -> Result<Self, BenchError> {
        let refused = |field: &str, message: String| BenchError::InvalidPlan {
            field: field.to_string(),
            message,
        };
        let ours = format!(
            "this client, membench {MEMBENCH_VERSION}, reads plan formats up to {PLAN_FORMAT}"
        );
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            refused(
                &json_path::field_of(text, &e),
                format!("is not JSON: {}", json_path::without_position(&e)),
            )
        })?;
        let Some(object) = value.as_object() else {
            return Err(refused(
                "(the plan)",
                "is not a JSON object: give the document `membench run SPEC --print-plan` prints"
                    .into(),
            ));
        };
        let written_by = object
            .get("written_by")
            .and_then(|v| v.as_str())
            .unwrap_or("(unknown)");
        let format = match object.get("format") {
            None => {
                return Err(refused(
                    "format",
                    format!("is missing: a plan says which format it is; {ours}"),
                ));
            }
            Some(format) => format.as_u64().ok_or_else(|| {
                refused(
                    "format",
                    format!("is {format}, not a whole number of at least 0; {ours}"),
                )
            })?,
        };
        if format > u64::from(PLAN_FORMAT) {
            return Err(refused(
                "format",
                format!(
                    "is {format}, written by membench {written_by}; {ours}: run a client image as new as the membench that wrote the plan"
                ),
            ));
        }
        let plan: RunPlan = serde_json::from_str(text).map_err(|e| {
            refused(
                &json_path::field_of(text, &e),
                format!(
                    "{} (the plan is format {format}, written by membench {written_by}; {ours})",
                    json_path::without_position(&e)
                ),
            )
        })?;
        plan.settings.validate().map_err(|e| match e {
            BenchError::InvalidArgument { field, message } => {
                refused(&format!("settings.{}", field.replace('-', "_")), message)
            }
            other => other,
        })?;
        Ok(plan)
    }
}

#[cfg(test)]
mod tests;
