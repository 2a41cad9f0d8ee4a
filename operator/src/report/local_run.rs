//! What one local run of a MemoryBenchmark measured (`membench run`'s result): the engines'
//! reports and the machine they ran on. The local runner fills it in; `--output json` prints
//! it, and the tables and the HTML page render it.

use serde::Serialize;

use crate::client::measurement::measure::BenchmarkReport;

/// Everything one local run of one MemoryBenchmark measured.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct LocalComparison {
    pub benchmark: String,
    /// The spec's instance type, if it names one; a local run does not apply it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// The architecture the engines are built for (the spec's `arch`, else this machine's), as
    /// `uname -m` names it. Builds of another architecture than the host's run under an
    /// emulator (each engine's `engine.emulator`), whose rates are not the architecture's.
    pub arch: String,
    pub host: HostInfo,
    pub engines: Vec<BenchmarkReport>,
    /// Each engine's median bytes per item against the first engine's, in percent.
    pub change_vs_first_percent: Vec<Option<f64>>,
}

impl LocalComparison {
    /// What the headings say of the spec's instance type: that a local run does not apply it,
    /// when the spec names one.
    pub fn instance_type_note(&self) -> String {
        self.instance_type
            .as_ref()
            .map(|t| format!("; the spec's instanceType {t} is not applied locally"))
            .unwrap_or_default()
    }
}

/// The machine a local run ran on.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct HostInfo {
    pub hostname: String,
    pub arch: String,
    pub cpus: usize,
}

impl HostInfo {
    pub fn current() -> Self {
        Self {
            hostname: std::fs::read_to_string("/etc/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_default(),
            arch: std::env::consts::ARCH.to_string(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}
