//! What a run needs beside its plan (`client::measurement::plan`): the handles and addresses that belong to
//! this process and this run, never to the settings (a stop request, who reads the engine's
//! container, where the replica listens). The protocol that follows them is `client::measurement::measure`.

pub use crate::client::measurement::plan::{DEFAULT_OTHER_CLIENTS_TIMEOUT, RunSettings};

use crate::client::connection::engine::EngineAddress;
use crate::client::connection::stop_request::StopRequest;
use crate::error::BenchError;

/// How to run the load: the plan's settings, and the run's own handles.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Every setting of the run, as its plan has them.
    pub settings: RunSettings,
    /// Stops the run early when requested (never, unless someone holds a clone).
    pub stop: StopRequest,
    /// The replica of `settings.replica`'s sync: an engine of the same kind that can reach the
    /// primary at the address this client uses (a second local process, the run's replica
    /// pod). The phase runs only with both.
    pub replica_address: Option<EngineAddress>,
    /// Who reads the engine's container at a peak phase's marks when its processes are not on
    /// this machine (`client::measurement::container_memory`: the operator, through the progress endpoint).
    pub container:
        Option<std::sync::Arc<dyn crate::client::measurement::container_memory::ContainerMarks>>,
}

impl LoadOptions {
    /// A run of `settings` with no handle: never stopped, the engine's processes on this
    /// machine or not read, no replica.
    pub fn of(settings: RunSettings) -> Self {
        Self {
            settings,
            ..Self::default()
        }
    }

    /// The settings' ranges, and a replica's sync with a replica to sync (a replica given
    /// without the phase would be left alone, and is refused too).
    pub fn validate(&self) -> Result<(), BenchError> {
        self.settings.validate()?;
        match (&self.settings.replica, &self.replica_address) {
            (Some(_), None) => Err(BenchError::InvalidArgument {
                field: "replica".into(),
                message: "the plan asks for a replica's sync (settings.replica) and no replica was given: pass --replica HOST:PORT, an empty engine of the same kind".into(),
            }),
            (None, Some(address)) => Err(BenchError::InvalidArgument {
                field: "replica".into(),
                message: format!(
                    "{address} was given as the replica, and the plan asks for no replica's sync: add --replica-writes-per-sec N (or spec.peak.replica), or remove --replica"
                ),
            }),
            _ => Ok(()),
        }
    }
}
