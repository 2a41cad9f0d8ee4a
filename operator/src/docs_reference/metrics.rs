//! The metrics page: every metric the operator's registry holds, with its type, labels and help.

use crate::metrics::MetricDescription;

use super::{code, header, table_cell};

/// The metrics reference page for `metrics` (from [`crate::metrics::Metrics::descriptions`]).
pub fn metrics_page(metrics: &[MetricDescription]) -> String {
    let mut page = header("metrics", "Metrics", "the operator's metrics registry");
    page.push_str(
        "The operator serves these on its metrics port at `/metrics`. Result series carry the \
         benchmark's name and the engine entry; they go when the benchmark is deleted.\n\n",
    );
    page.push_str("| metric | type | labels | help |\n|---|---|---|---|\n");
    for metric in metrics {
        let labels = metric
            .labels
            .iter()
            .map(|l| code(l))
            .collect::<Vec<_>>()
            .join(", ");
        page.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            code(&metric.name),
            metric.kind,
            if labels.is_empty() {
                "-".to_string()
            } else {
                labels
            },
            table_cell(&metric.help)
        ));
    }
    page
}
