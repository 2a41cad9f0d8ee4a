//! The capacity plan as a table: per engine and instance family, the projected memory at N,
//! what the node needs, the smallest type that holds it, how full, and (priced) what it costs.

use crate::capacity::peak::HeadroomBasis;
use crate::capacity::rss::RssBasis;
use crate::capacity::{CapacityPlan, EngineCapacity, GrowthRule};

use super::table::{Table, format_bytes};

/// Bytes in GiB, as instance types give their memory.
pub fn format_gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn rule_label(rule: GrowthRule) -> &'static str {
    match rule {
        GrowthRule::PowerOfTwoDict => "dict 2^k",
        GrowthRule::BucketedHashtable => "hashtable 7/bucket",
        GrowthRule::DashTable => "dash table segments",
        GrowthRule::Unknown => "unknown (wide band)",
    }
}

/// One row per engine and family.
pub fn capacity_table(plan: &CapacityPlan) -> Table {
    let mut table = Table::new(&[
        "Engine",
        "Growth rule",
        "used_memory at N",
        "band",
        "RSS",
        "Node needs",
        "Family",
        "Smallest type",
        "Fill",
        "$/month",
    ]);
    for engine in &plan.engines {
        for fit in &engine.instance_types {
            table.push(vec![
                engine.name.clone(),
                rule_label(engine.projection.growth_rule).to_string(),
                format_bytes(engine.projected_used_memory as f64),
                format!(
                    "{} - {}",
                    format_bytes(engine.projected_used_memory_band[0] as f64),
                    format_bytes(engine.projected_used_memory_band[1] as f64)
                ),
                format_bytes(engine.projected_rss as f64),
                fit.required_node_memory
                    .map_or_else(String::new, format_gib),
                fit.family.to_string(),
                fit.instance_type
                    .clone()
                    .unwrap_or_else(|| "none holds it".to_string()),
                fit.fill_percent
                    .map_or_else(String::new, |f| format!("{f:.1}%")),
                fit.monthly_usd
                    .map_or_else(String::new, |m| format!("{m:.2}")),
            ]);
        }
    }
    for missing in &plan.not_projected {
        let mut row = vec![
            missing.name.clone(),
            format!("not projected: {}", missing.reason),
        ];
        row.resize(10, String::new());
        table.push(row);
    }
    table
}

/// Per engine, the recommended maxmemory and memory limit, and each term of the limit: its
/// bytes, whether this run measured it or it is a default, and what it is.
pub fn recommended_table(plan: &CapacityPlan) -> Table {
    let mut table = Table::new(&["Engine", "Setting or term", "Bytes", "Source", "What it is"]);
    for engine in &plan.engines {
        let Some(r) = &engine.recommended else {
            continue;
        };
        let row = |what: &str, bytes: u64, source: &str, note: String| {
            vec![
                engine.name.clone(),
                what.to_string(),
                format_bytes(bytes as f64),
                source.to_string(),
                note,
            ]
        };
        table.push(row(
            "maxmemory",
            r.maxmemory_bytes,
            "measured",
            "used_memory projected at the planned size".into(),
        ));
        for term in &r.terms {
            table.push(row(
                &format!("+ {}", term.name),
                term.bytes,
                term.source.as_str(),
                term.note.clone().unwrap_or_default(),
            ));
        }
        table.push(row(
            "= memory limit",
            r.memory_limit_bytes,
            "",
            format!(
                "reserve {:.1}% above maxmemory{}",
                r.reserve_percent,
                r.writes_per_sec
                    .map_or_else(String::new, |w| format!("; holds at {w:.0} writes/s"))
            ),
        ));
        table.push(row(
            "memory request",
            r.memory_request_bytes,
            "",
            "empty_rss + data_rss".into(),
        ));
    }
    table
}

/// The lines to paste for each engine's recommended settings, and what would measure a
/// default.
pub fn recommended_config(plan: &CapacityPlan) -> String {
    let mut lines = Vec::new();
    for engine in &plan.engines {
        let Some(r) = &engine.recommended else {
            continue;
        };
        lines.push(format!("{}: the engine's container", engine.name));
        lines.extend(r.config.resources.lines().map(|l| format!("  {l}")));
        lines.push(format!(
            "{}: the engine: {}",
            engine.name, r.config.maxmemory
        ));
        if let Some(percent) = r.config.elasticache_reserved_memory_percent {
            lines.push(format!(
                "{}: ElastiCache: reserved-memory-percent {percent}",
                engine.name
            ));
        }
        for note in &r.notes {
            lines.push(format!("note: {}: {note}", engine.name));
        }
    }
    lines.join("\n")
}

/// The line above the table: what was planned for.
pub fn capacity_heading(plan: &CapacityPlan, item: &str) -> String {
    let families: Vec<&str> = plan.instance_families.iter().map(|f| f.as_str()).collect();
    let prices = plan.prices.as_ref().map_or_else(
        || "no prices given (--prices FILE or spec.capacity.pricesConfigMapRef)".to_string(),
        |p| format!("prices from {p}"),
    );
    format!(
        "capacity at {} {item}s, {}% headroom, families {}; {prices}",
        plan.items,
        plan.headroom_percent,
        families.join(", ")
    )
}

/// The lines under the table: the cheapest engine, and each engine's notes.
pub fn capacity_footer(plan: &CapacityPlan) -> String {
    let mut lines = Vec::new();
    if plan.cheapest_tie.len() > 1 {
        let each: Vec<String> = plan
            .cheapest_tie
            .iter()
            .map(|c| format!("{} on {}", c.engine, c.instance_type))
            .collect();
        lines.push(format!(
            "cheapest: a tie of {} engines at {:.2} USD a month: {}",
            each.len(),
            plan.cheapest_tie[0].monthly_usd,
            each.join(", ")
        ));
    } else if let Some(c) = &plan.cheapest {
        lines.push(format!(
            "cheapest: {} on {} at {:.2} USD a month",
            c.engine, c.instance_type, c.monthly_usd
        ));
    }
    for note in &plan.notes {
        lines.push(format!("note: {note}"));
    }
    for engine in &plan.engines {
        lines.push(rss_line(engine));
        if engine.headroom_basis == HeadroomBasis::SnapshotPeak {
            let measured = engine.snapshot_peak_ratio.unwrap_or(1.0);
            let peak = match engine.planned_peak_ratio {
                Some(planned) if planned - measured >= 0.0005 => format!(
                    "the RSS at the snapshot's peak, measured {measured:.3}x and planned {planned:.3}x for a longer save (the recommended limit's copy_on_write)"
                ),
                _ => format!("the RSS at the snapshot's measured peak ({measured:.3}x)"),
            };
            lines.push(format!(
                "engine memory: {}: {peak}, in place of the {}% headroom",
                engine.name, plan.headroom_percent
            ));
        }
        for note in &engine.projection.notes {
            lines.push(format!("note: {}: {note}", engine.name));
        }
    }
    lines.join("\n")
}

/// Where an engine's RSS came from, and why when not from the data's settled growth.
fn rss_line(engine: &EngineCapacity) -> String {
    let basis = match (engine.rss_basis, engine.rss_growth_ratio) {
        (RssBasis::DataGrowthSettled, Some(g)) => format!(
            "the data's settled growth ({g:.3} bytes of RSS per byte of used_memory, from the empty server's)"
        ),
        (RssBasis::DataGrowthSettled, None) => "the data's settled growth".to_string(),
        (RssBasis::RunRatio, _) => format!("the run's ratio {:.3}", engine.fragmentation_ratio),
    };
    match &engine.rss_note {
        Some(note) => format!("RSS: {}: {basis}: {note}", engine.name),
        None => format!("RSS: {}: {basis}", engine.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::tests::three_engines_at_one_price;

    #[test]
    fn a_plan_from_a_measured_snapshot_peak_says_it_replaced_the_headroom() {
        let plan = crate::capacity::tests::plan_with_snapshot_peak("dragonfly", 1.004);
        let footer = capacity_footer(&plan);
        assert!(
            footer.contains(
                "engine memory: dragonfly: the RSS at the snapshot's measured peak (1.004x), in place of the 25% headroom"
            ),
            "{footer}"
        );
        // A forking engine's short save (1.2x) is planned for one three times as long.
        let plan = crate::capacity::tests::plan_with_snapshot_peak("valkey", 1.2);
        let footer = capacity_footer(&plan);
        assert!(
            footer.contains(
                "engine memory: valkey: the RSS at the snapshot's peak, measured 1.200x and planned 1.488x for a longer save (the recommended limit's copy_on_write), in place of the 25% headroom"
            ),
            "{footer}"
        );
    }

    #[test]
    fn the_recommended_settings_show_each_term_its_source_and_the_lines_to_paste() {
        let (plan, _) = three_engines_at_one_price();
        let table = recommended_table(&plan).render(crate::report::table::OutputFormat::Markdown);
        let r = plan.engines[0].recommended.as_ref().unwrap();
        for term in &r.terms {
            assert!(table.contains(&format!("+ {}", term.name)), "{table}");
        }
        assert!(
            table.contains("= memory limit") && table.contains("default"),
            "{table}"
        );
        let config = recommended_config(&plan);
        assert!(
            config.contains(&format!("memory: {}Mi", r.memory_limit_bytes >> 20))
                && config.contains(&format!("maxmemory {}", r.maxmemory_bytes))
                && config.contains("reserved-memory-percent"),
            "{config}"
        );
    }

    #[test]
    fn a_tie_on_price_is_called_a_tie() {
        let (plan, _) = three_engines_at_one_price();
        let footer = capacity_footer(&plan);
        assert!(
            footer.contains(
                "cheapest: a tie of 3 engines at 146.00 USD a month: a on r8g.xlarge, b on \
                 r8g.xlarge, c on r8g.xlarge"
            ),
            "{footer}"
        );
    }
}
