//! Capacity: what an engine needs at the size a platform team plans for, the instance type that
//! holds it, and, with the user's prices, what it costs a month.
//!
//! - [`instance_types`]: the embedded instance-type table and what a node keeps for itself;
//! - [`projection`]: used_memory at N items from a run's growth curve, with a band;
//! - [`rebuild`]: used_memory at N keys of a profile's rebuild, from a rebuild at another scale;
//! - [`dash_table`]: Dragonfly's keyspace growth (segments per shard), which the projection fits;
//! - [`prices`]: the user's prices file;
//! - [`rss`]: the RSS at N, from the data's settled growth or the run's ratio, raised by a
//!   churn's factor;
//! - [`overshoot`]: room in that RSS for a load past maxmemory's peak above it;
//! - [`peak`]: that RSS raised by a snapshot's peak under writes over the steady memory, a
//!   forking engine's copy planned for a longer save than the measured one;
//! - [`measurement`]: a run's result (a local report, a status) read as the model's input;
//! - [`recommend`]: the maxmemory and container memory limit to deploy, the limit a sum of
//!   named terms, each measured or a default;
//! - [`given_limit`]: a memory limit the user gives a saved result's plan, refused below what
//!   the engine holds with no data;
//! - [`status`]: the plan from and for a benchmark's status (`status.capacity`).
//!
//! `membench run` (a spec with `capacity`), `membench capacity RESULT.json` and the operator all
//! call [`plan`], so they do the same arithmetic.
//!
//! Per engine: the projected used_memory at N (and its band), the projected RSS (from the RSS
//! the data's growth added in a settled first repetition, else the run's own fragmentation
//! ratio, used_memory_rss / used_memory; never below used_memory), the memory given to the
//! engine (the band's top RSS over 1 - headroom, or raised by a measured snapshot peak in its
//! place, with the same copy the recommended limit plans: `peak::planned_copy`), and per
//! instance type the memory the node needs (that, plus kube-reserved and the eviction
//! threshold of the type, `instance_types`) and how full the node would be.

pub mod dash_table;
pub mod given_limit;
pub mod instance_types;
pub mod measurement;
pub mod overshoot;
pub mod peak;
pub mod prices;
pub mod projection;
pub mod rebuild;
pub mod recommend;
pub mod rss;
pub mod status;

use serde::{Deserialize, Serialize};

use crate::crd::{CapacitySpec, EngineKind, InstanceFamily};
pub use measurement::EngineMeasurement;
pub use prices::Prices;
pub use projection::{GrowthRule, Projection};

/// What to plan for.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityRequest {
    pub items: u64,
    pub headroom_percent: u32,
    pub families: Vec<InstanceFamily>,
    pub prices: Option<Prices>,
    /// What the plan should say of the request itself: an instance type the table does not
    /// know, and what was planned over instead (`unknown_instance_types_note`).
    pub notes: Vec<String>,
    /// The figures the recommended settings use where the run measured none.
    pub defaults: recommend::TermDefaults,
}

/// The most headroom a plan takes: beyond it the engine would get a tenth of its node.
pub const MAX_HEADROOM_PERCENT: u32 = 90;

impl CapacityRequest {
    /// The request of a spec's `capacity`, with the families defaulted from the spec's
    /// instance types (all the table's when it names none the table knows).
    pub fn from_spec(
        spec: &CapacitySpec,
        instance_types: &[&str],
        prices: Option<Prices>,
    ) -> Result<Self, String> {
        let families = default_families(&spec.instance_families, instance_types);
        let request = Self {
            items: spec.items,
            headroom_percent: spec.headroom_percent,
            notes: unknown_instance_types_note(&spec.instance_families, instance_types, &families)
                .into_iter()
                .collect(),
            families,
            prices,
            defaults: spec
                .defaults
                .as_ref()
                .map(recommend::TermDefaults::from)
                .unwrap_or_default(),
        };
        request.validate()?;
        Ok(request)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.items == 0 {
            return Err(
                "capacity items must be at least 1: the number of items to plan for".into(),
            );
        }
        if self.headroom_percent > MAX_HEADROOM_PERCENT {
            return Err(format!(
                "capacity headroomPercent must be between 0 and {MAX_HEADROOM_PERCENT}, not {}",
                self.headroom_percent
            ));
        }
        Ok(())
    }
}

/// The families given, or the families of `instance_types` (a benchmark's `instanceType`, or
/// each of its `instanceTypes`), or every family of the table when it knows none of them.
pub fn default_families(given: &[InstanceFamily], instance_types: &[&str]) -> Vec<InstanceFamily> {
    if !given.is_empty() {
        let mut families = given.to_vec();
        families.dedup();
        return families;
    }
    let mut families: Vec<InstanceFamily> = Vec::new();
    for family in instance_types
        .iter()
        .filter_map(|t| instance_types::family_of(t))
    {
        if !families.contains(&family) {
            families.push(family);
        }
    }
    if families.is_empty() {
        InstanceFamily::ALL.to_vec()
    } else {
        families
    }
}

/// One instance type's fit for one engine.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct InstanceFit {
    pub family: InstanceFamily,
    /// The smallest type of the family that holds the engine; `None` when none does.
    pub instance_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpus: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// kube-reserved plus the eviction threshold of that type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_reserve_bytes: Option<u64>,
    /// The engine's memory plus the node's reserve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_node_memory: Option<u64>,
    /// required_node_memory / the type's memory, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill_percent: Option<f64>,
    /// The monthly cost of one node, when the prices give the type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monthly_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The cheapest priced instance type that holds an engine.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Cheapest {
    pub engine: String,
    pub instance_type: String,
    pub monthly_usd: f64,
}

/// What one engine needs at N items.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct EngineCapacity {
    pub name: String,
    /// used_memory projected at N items, in bytes.
    pub projected_used_memory: u64,
    /// The band around it: [low, high].
    pub projected_used_memory_band: [u64; 2],
    /// used_memory_rss / used_memory as the run measured it (median over repetitions).
    pub fragmentation_ratio: f64,
    /// RSS at projected_used_memory, by `rss_basis`, never below projected_used_memory.
    pub projected_rss: u64,
    /// What projected_rss came from: `data-growth-settled` (the first repetition's settled
    /// RSS growth over its data's growth) or `run-ratio` (the fragmentation ratio).
    pub rss_basis: rss::RssBasis,
    /// RSS added per byte of used_memory the data added, on the data-growth basis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_growth_ratio: Option<f64>,
    /// Why the run ratio was used, or that the RSS was raised to used_memory, by a churn's
    /// factor or for an eviction's overshoot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_note: Option<String>,
    /// peak used_memory / maxmemory of the run's load past maxmemory (`spec.eviction`), when
    /// above 1: projected_rss holds that share of projected_used_memory more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_overshoot_ratio: Option<f64>,
    /// peak / steady memory of a snapshot saved under the run's writes (`spec.peak.snapshot`),
    /// the highest of its repetitions, as measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_peak_ratio: Option<f64>,
    /// What projected_rss was raised by for that peak: for a forking engine, its copy raised to
    /// what a save `spec.capacity.defaults.saveLengthFactor` times as long copies, as the
    /// recommended limit's `copy_on_write` term is (`peak::planned_copy`); a save without a
    /// fork as measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_peak_ratio: Option<f64>,
    /// The memory to give the engine: the band's top RSS (by `rss_basis`, never below its
    /// used_memory) over 1 - headroom, or raised by the snapshot's peak in its place
    /// (`headroom_basis`).
    pub engine_memory: u64,
    /// `headroom-percent` or `snapshot-peak` (`peak::engine_memory`). Absent from results
    /// planned before it: the headroom percent.
    #[serde(default)]
    pub headroom_basis: peak::HeadroomBasis,
    /// engine_memory plus the reserve of the smallest instance type that holds it (of the
    /// largest type of the families, when none does).
    pub required_node_memory: u64,
    /// Per family: the smallest instance type that holds the engine.
    pub instance_types: Vec<InstanceFit>,
    /// The smallest instance type (least memory) of all families that holds the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smallest_instance_type: Option<String>,
    /// The cheapest priced instance type that holds it, when prices were given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cheapest: Option<Cheapest>,
    pub projection: Projection,
    /// The maxmemory and container memory limit to deploy at the planned size, with the
    /// terms of the limit. Absent from results planned before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommended: Option<recommend::Recommended>,
}

/// The capacity plan of one benchmark.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CapacityPlan {
    pub items: u64,
    pub headroom_percent: u32,
    pub instance_families: Vec<InstanceFamily>,
    /// Where the prices came from, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<String>,
    pub engines: Vec<EngineCapacity>,
    /// Engines the plan could not project, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_projected: Vec<NotProjected>,
    /// The engine and instance type that cost least a month, when prices were given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cheapest: Option<Cheapest>,
    /// The smallest instance type that holds any engine, and which engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smallest_instance_type: Option<String>,
    /// Every engine at the cheapest price (within half a cent a month), when more than one
    /// is: a tie, not one engine cheaper than the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cheapest_tie: Vec<Cheapest>,
    /// What a reader of the plan should know: an instance type the table does not know, and
    /// what was planned over instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// How close two monthly prices are to be a tie.
pub const PRICE_TIE_USD: f64 = 0.005;

/// The note for instance types the table does not know, when the families were not given
/// and so come from the instance types: which were not known and what the plan looks in.
pub fn unknown_instance_types_note(
    given: &[InstanceFamily],
    instance_types: &[&str],
    planned: &[InstanceFamily],
) -> Option<String> {
    if !given.is_empty() {
        return None;
    }
    let unknown: Vec<&str> = instance_types
        .iter()
        .copied()
        .filter(|t| instance_types::family_of(t).is_none())
        .collect();
    if unknown.is_empty() {
        return None;
    }
    let families: Vec<&str> = planned.iter().map(|f| f.as_str()).collect();
    Some(format!(
        "the result's instance type {} is not in membench's instance-type table (it knows the families {}): the plan looks in {} instead; --instance-families chooses",
        unknown.join(", "),
        InstanceFamily::ALL
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        families.join(", ")
    ))
}

/// An engine without a projection.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NotProjected {
    pub name: String,
    pub reason: String,
}

/// The fit of one engine needing `engine_memory` in one family.
fn fit_in_family(
    engine_memory: u64,
    family: InstanceFamily,
    prices: Option<&Prices>,
) -> InstanceFit {
    let holds = instance_types::of_family(family)
        .find(|t| engine_memory + t.node_reserve_bytes() <= t.memory_bytes());
    match holds {
        Some(t) => {
            let required = engine_memory + t.node_reserve_bytes();
            InstanceFit {
                family,
                instance_type: Some(t.name.clone()),
                vcpus: Some(t.vcpus),
                memory_bytes: Some(t.memory_bytes()),
                node_reserve_bytes: Some(t.node_reserve_bytes()),
                required_node_memory: Some(required),
                fill_percent: Some(required as f64 / t.memory_bytes() as f64 * 100.0),
                monthly_usd: prices.and_then(|p| p.monthly_usd(&t.name)),
                note: None,
            }
        }
        None => {
            let largest = instance_types::of_family(family)
                .last()
                .expect("every family has sizes");
            InstanceFit {
                family,
                instance_type: None,
                vcpus: None,
                memory_bytes: None,
                node_reserve_bytes: None,
                required_node_memory: Some(engine_memory + largest.node_reserve_bytes()),
                fill_percent: None,
                monthly_usd: None,
                note: Some(format!(
                    "no {family} type holds it: {} has {} GiB",
                    largest.name, largest.memory_gib
                )),
            }
        }
    }
}

/// What one engine needs at `request.items`.
pub fn plan_engine(
    measurement: &EngineMeasurement,
    request: &CapacityRequest,
) -> Result<EngineCapacity, String> {
    let rule = GrowthRule::of(
        &measurement.engine,
        &measurement.version,
        measurement.threads,
    );
    let entries = request.items.saturating_mul(measurement.entries_per_item);
    let shards = measurement.threads.unwrap_or(1).max(1);
    let mut projection = match &measurement.rebuild {
        Some(run) => rebuild::project(rule, shards, run, entries)?,
        None => projection::project(rule, shards, &measurement.curve, entries)?,
    };
    let per_thread = measurement
        .engine
        .parse::<EngineKind>()
        .is_ok_and(|kind| kind.capabilities().keyspace_per_thread);
    if rule == GrowthRule::Unknown && per_thread {
        projection.notes.insert(
            0,
            "the run does not report Dragonfly's thread count (INFO server thread_count; a result from before membench read it), so where its dash table's segment splits land is not known".to_string(),
        );
    }
    let ratio = measurement.fragmentation_ratio.unwrap_or(1.0);
    // The engine may fill the maxmemory it is recommended (the projected used_memory rounded
    // up to a MiB), which can lie above a narrow band's top: the node holds that much at least.
    let top = projection
        .high
        .max(recommend::data_maxmemory(projection.used_memory));
    // The save's copy is planned on the steady RSS and the overshoot added beside it, as the
    // recommended limit's terms are, so the node holds the peak that limit is for.
    let rss = overshoot::make_room(
        peak::make_room(
            rss::project(measurement, projection.used_memory, top),
            measurement.snapshot.as_ref(),
            peak::SaveCopyPlan::of(&measurement.engine, request.defaults.save_length_factor),
        ),
        measurement.eviction.as_ref(),
        projection.used_memory,
        top,
    );
    let (engine_memory, headroom_basis) = peak::engine_memory(&rss, request.headroom_percent);
    let fits: Vec<InstanceFit> = request
        .families
        .iter()
        .map(|&f| fit_in_family(engine_memory, f, request.prices.as_ref()))
        .collect();
    let smallest = fits
        .iter()
        .filter(|f| f.instance_type.is_some())
        .min_by_key(|f| f.memory_bytes.unwrap_or(u64::MAX));
    let required_node_memory = smallest
        .and_then(|f| f.required_node_memory)
        .or_else(|| fits.iter().filter_map(|f| f.required_node_memory).max())
        .unwrap_or(engine_memory);
    let cheapest = fits
        .iter()
        .filter_map(|f| Some((f.instance_type.clone()?, f.monthly_usd?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(instance_type, monthly_usd)| Cheapest {
            engine: measurement.name.clone(),
            instance_type,
            monthly_usd,
        });
    let recommended = recommend::recommend(measurement, projection.used_memory, &request.defaults);
    Ok(EngineCapacity {
        recommended: Some(recommended),
        name: measurement.name.clone(),
        projected_used_memory: projection.used_memory,
        projected_used_memory_band: [projection.low, projection.high],
        fragmentation_ratio: ratio,
        projected_rss: rss.rss,
        rss_basis: rss.basis,
        rss_growth_ratio: rss.growth_ratio,
        rss_note: rss.note,
        eviction_overshoot_ratio: rss.eviction_overshoot_ratio,
        snapshot_peak_ratio: rss.snapshot_peak_ratio,
        planned_peak_ratio: rss.planned_peak_ratio,
        engine_memory,
        headroom_basis,
        required_node_memory,
        smallest_instance_type: smallest.and_then(|f| f.instance_type.clone()),
        instance_types: fits,
        cheapest,
        projection,
    })
}

/// The plan of every engine of a benchmark.
pub fn plan(measurements: &[EngineMeasurement], request: &CapacityRequest) -> CapacityPlan {
    let mut engines = Vec::new();
    let mut not_projected = Vec::new();
    for m in measurements {
        match plan_engine(m, request) {
            Ok(e) => engines.push(e),
            Err(reason) => not_projected.push(NotProjected {
                name: m.name.clone(),
                reason,
            }),
        }
    }
    let cheapest = engines
        .iter()
        .filter_map(|e| e.cheapest.clone())
        .min_by(|a, b| a.monthly_usd.total_cmp(&b.monthly_usd));
    let cheapest_tie: Vec<Cheapest> = match &cheapest {
        Some(c) => engines
            .iter()
            .filter_map(|e| e.cheapest.clone())
            .filter(|o| (o.monthly_usd - c.monthly_usd).abs() <= PRICE_TIE_USD)
            .collect(),
        None => Vec::new(),
    };
    let cheapest_tie = if cheapest_tie.len() > 1 {
        cheapest_tie
    } else {
        Vec::new()
    };
    let smallest_instance_type = engines
        .iter()
        .filter_map(|e| {
            let fit = e
                .instance_types
                .iter()
                .find(|f| f.instance_type == e.smallest_instance_type)?;
            Some((fit.memory_bytes?, e.smallest_instance_type.clone()?))
        })
        .min_by_key(|(bytes, _)| *bytes)
        .map(|(_, name)| name);
    CapacityPlan {
        items: request.items,
        headroom_percent: request.headroom_percent,
        instance_families: request.families.clone(),
        prices: request.prices.as_ref().map(|p| p.source.clone()),
        engines,
        not_projected,
        cheapest,
        smallest_instance_type,
        cheapest_tie,
        notes: request.notes.clone(),
    }
}

/// The plan of a local run's engine reports; those that measured nothing are named in
/// `not_projected`, with why.
pub fn plan_reports(
    reports: &[crate::client::measurement::measure::BenchmarkReport],
    request: &CapacityRequest,
) -> CapacityPlan {
    let mut measurements = Vec::new();
    let mut not_projected = Vec::new();
    for report in reports {
        match EngineMeasurement::from_report(report) {
            Ok(m) => measurements.push(m),
            Err(reason) => not_projected.push(NotProjected {
                name: report.name.clone(),
                reason,
            }),
        }
    }
    let mut plan = plan(&measurements, request);
    plan.not_projected.extend(not_projected);
    plan
}

impl CapacityPlan {
    /// Adds the plan to a comparison's JSON (`membench run --output json`, its result file):
    /// `capacity` beside `engines` (what was planned for, `cheapest`), and each engine's own
    /// `capacity` (`projected_used_memory`, `required_node_memory`, `instance_types`, ...).
    pub fn attach_to(&self, comparison: &mut serde_json::Value) {
        let mut summary = serde_json::to_value(self).expect("plans serialize");
        if let Some(summary) = summary.as_object_mut() {
            summary.remove("engines");
        }
        comparison["capacity"] = summary;
        for engine in comparison["engines"].as_array_mut().into_iter().flatten() {
            let name = engine["name"].as_str().unwrap_or_default().to_string();
            if let Some(e) = self.engines.iter().find(|e| e.name == name) {
                engine["capacity"] = serde_json::to_value(e).expect("plans serialize");
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
