//! One engine run of the status being decided ([`EngineRun`]): the run's entry in
//! `status.engines`, and the whole status for what a decision about the run reads or changes
//! beyond it (the other runs, progress). The decision's functions about one run take it. Pure.

use crate::crd::{EngineStatus, MemoryBenchmarkStatus};

/// Engine run `index` of `status`.
pub(super) struct EngineRun<'s> {
    status: &'s mut MemoryBenchmarkStatus,
    index: usize,
}

impl<'s> EngineRun<'s> {
    pub(super) fn new(status: &'s mut MemoryBenchmarkStatus, index: usize) -> Self {
        Self { status, index }
    }

    /// The run's index in `status.engines` (and in its pods' names).
    pub(super) fn index(&self) -> usize {
        self.index
    }

    /// The run's entry in the status.
    pub(super) fn engine(&self) -> &EngineStatus {
        &self.status.engines[self.index]
    }

    pub(super) fn engine_mut(&mut self) -> &mut EngineStatus {
        &mut self.status.engines[self.index]
    }

    /// The runs before this one.
    pub(super) fn earlier(&self) -> &[EngineStatus] {
        &self.status.engines[..self.index]
    }

    /// The whole status, for the benchmark-wide fields.
    pub(super) fn status(&self) -> &MemoryBenchmarkStatus {
        self.status
    }

    /// The whole status, for a decision that changes other runs too.
    pub(super) fn status_mut(&mut self) -> &mut MemoryBenchmarkStatus {
        self.status
    }
}
