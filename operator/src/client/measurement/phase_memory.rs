//! The memory a peak phase (`client::phases::snapshot`, `client::phases::replica`) is measured by, from the
//! best source the client has: the engine's process tree when the engine runs on the client's
//! own machine (`client::measurement::process_tree`: sampled every 20 ms), else the engine container's
//! memory cgroup as the kubelet keeps it, read by the operator at the phase's two marks
//! (`client::measurement::container_memory`), else none (`engine-only`: the engine's own figures).

use crate::client::measurement::container_memory::{ContainerMarks, ContainerPeak, MARK_TIMEOUT};
use crate::client::measurement::process_tree::{self, TreeWatch};

/// The sources, as a report's `source` names them.
pub const PROCESS_TREE: &str = "process-tree";
pub const CONTAINER_CGROUP: &str = "container-cgroup";
pub const ENGINE_ONLY: &str = "engine-only";

/// A phase's memory, watched from just before it to its end.
pub enum PhaseWatch<'a> {
    Tree(TreeWatch),
    Container {
        marks: &'a dyn ContainerMarks,
        before: Result<crate::client::measurement::container_memory::ContainerReading, String>,
    },
    None,
}

/// What a [`PhaseWatch`] saw.
#[derive(Clone, Debug, PartialEq)]
pub struct PhasePeak {
    /// [`PROCESS_TREE`], [`CONTAINER_CGROUP`] or [`ENGINE_ONLY`].
    pub source: &'static str,
    pub before_bytes: Option<u64>,
    /// The highest the phase reached, never below `before_bytes`; absent when not known.
    pub peak_bytes: Option<u64>,
    /// The interval the sampler aimed at, and its readings (0 and 0 for the container's
    /// cgroup, whose high-water mark the kernel keeps itself).
    pub sample_interval_ms: u64,
    pub samples: u64,
    /// The container's high-water mark after the phase, whatever reached it (container-cgroup).
    pub high_water_bytes: Option<u64>,
    /// Why a figure is missing, when one is.
    pub note: Option<String>,
    /// The most processes the engine's tree held at a reading (process-tree only): whether
    /// the engine forked during the phase, as measured.
    pub most_processes: Option<u64>,
    /// The replica's container at its highest during the phase, when the marks read it and
    /// its high-water mark rose then (`spec.peak.replica` in a cluster).
    pub replica_peak_bytes: Option<u64>,
}

impl<'a> PhaseWatch<'a> {
    /// Reads the memory just before the phase: the engine's tree when INFO's `process_id` is
    /// an engine on this machine, else a mark the operator answers when `marks` is given.
    pub fn start(process_id: Option<u32>, marks: Option<&'a dyn ContainerMarks>) -> Self {
        if process_id.and_then(process_tree::local_engine).is_some() {
            return Self::Tree(TreeWatch::start(process_id));
        }
        match marks {
            Some(marks) => Self::Container {
                marks,
                before: marks.mark(MARK_TIMEOUT),
            },
            None => Self::None,
        }
    }

    /// The phase's figures. After a phase that failed (`phase_ok` false) the container is not
    /// read again: its engine may be gone, and nobody would answer the mark.
    pub fn finish(self, phase_ok: bool) -> PhasePeak {
        let nothing = |note: Option<String>| PhasePeak {
            source: ENGINE_ONLY,
            before_bytes: None,
            peak_bytes: None,
            sample_interval_ms: 0,
            samples: 0,
            high_water_bytes: None,
            note,
            most_processes: None,
            replica_peak_bytes: None,
        };
        match self {
            Self::Tree(watch) => {
                let tree = watch.finish();
                PhasePeak {
                    source: tree.source,
                    before_bytes: tree.before_bytes,
                    peak_bytes: tree.peak_bytes,
                    sample_interval_ms: process_tree::SAMPLE_INTERVAL.as_millis() as u64,
                    samples: tree.samples,
                    high_water_bytes: None,
                    note: None,
                    most_processes: tree.most_processes,
                    replica_peak_bytes: None,
                }
            }
            Self::Container { .. } if !phase_ok => nothing(Some(
                "the phase failed: the engine container was not read after it".into(),
            )),
            Self::Container { marks, before } => {
                let both = before.and_then(|b| marks.mark(MARK_TIMEOUT).map(|a| (b, a)));
                match both {
                    Ok((before, after)) => {
                        let peak = ContainerPeak::of(before, after);
                        let replica = ContainerPeak::of_replica(before, after);
                        PhasePeak {
                            source: CONTAINER_CGROUP,
                            before_bytes: Some(peak.before_bytes),
                            peak_bytes: peak.peak_bytes,
                            sample_interval_ms: 0,
                            samples: 0,
                            high_water_bytes: Some(peak.high_water_bytes),
                            note: peak.note(),
                            most_processes: None,
                            replica_peak_bytes: replica.and_then(|r| r.peak_bytes),
                        }
                    }
                    Err(reason) => nothing(Some(format!(
                        "the engine container's memory could not be read: {reason}"
                    ))),
                }
            }
            Self::None => nothing(None),
        }
    }
}

impl PhasePeak {
    /// peak_bytes / before_bytes.
    pub fn ratio(&self) -> Option<f64> {
        self.peak_bytes
            .zip(self.before_bytes)
            .filter(|(_, b)| *b > 0)
            .map(|(p, b)| p as f64 / b as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::measurement::container_memory::ContainerReading;
    use std::sync::Mutex;
    use std::time::Duration;

    /// Answers marks from a list, as the operator would from the kubelet.
    #[derive(Debug)]
    struct Answers(Mutex<Vec<Result<ContainerReading, String>>>);

    impl ContainerMarks for Answers {
        fn mark(&self, _: Duration) -> Result<ContainerReading, String> {
            self.0.lock().unwrap().remove(0)
        }
    }

    fn reading(usage: u64, max: u64) -> ContainerReading {
        ContainerReading {
            usage_bytes: usage,
            max_usage_bytes: max,
            read_at_ms: 1,
            replica: None,
        }
    }

    #[test]
    fn an_engine_elsewhere_is_read_at_two_marks_and_its_peak_is_the_risen_high_water_mark() {
        let answers = Answers(Mutex::new(vec![
            Ok(reading(270, 280)),
            Ok(reading(275, 480)),
        ]));
        // No process of this machine has PID 0.
        let peak = PhaseWatch::start(Some(0), Some(&answers)).finish(true);
        assert_eq!(peak.source, CONTAINER_CGROUP);
        assert_eq!((peak.before_bytes, peak.peak_bytes), (Some(270), Some(480)));
        assert_eq!(peak.high_water_bytes, Some(480));
        assert!((peak.ratio().unwrap() - 480.0 / 270.0).abs() < 1e-12);
    }

    #[test]
    fn a_mark_without_an_answer_leaves_the_engines_own_figures_and_says_why() {
        let answers = Answers(Mutex::new(vec![
            Ok(reading(270, 280)),
            Err("nodes/proxy is forbidden".into()),
        ]));
        let peak = PhaseWatch::start(None, Some(&answers)).finish(true);
        assert_eq!(peak.source, ENGINE_ONLY);
        assert_eq!(peak.peak_bytes, None);
        assert!(peak.note.unwrap().contains("nodes/proxy is forbidden"));
        let none = PhaseWatch::start(None, None).finish(true);
        assert_eq!((none.source, none.note), (ENGINE_ONLY, None));
    }

    #[test]
    fn after_a_failed_phase_the_container_is_not_read_again() {
        // One answer only: a second mark would take what is not there and panic.
        let answers = Answers(Mutex::new(vec![Ok(reading(270, 280))]));
        let peak = PhaseWatch::start(None, Some(&answers)).finish(false);
        assert_eq!((peak.source, peak.peak_bytes), (ENGINE_ONLY, None));
        assert!(peak.note.unwrap().contains("the phase failed"));
    }
}
