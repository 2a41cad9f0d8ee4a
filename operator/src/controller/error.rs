//! What can go wrong in a reconciliation: only API calls (the decision itself cannot fail).

use crate::controller::write::engine_password;
use crate::controller::write::network_policy;

/// A reconciliation's failure: the API call that failed, for the log and the metrics.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot list the benchmark's pods: {0}")]
    ListPods(#[source] kube::Error),
    #[error("cannot create pod {name}: {source}")]
    CreatePod {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot delete pod {name}: {source}")]
    DeletePod {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write the status: {0}")]
    WriteStatus(#[source] kube::Error),
    #[error("cannot read the benchmark: {0}")]
    ReadBenchmark(#[source] kube::Error),
    #[error("cannot release the result finalizer of pod {name}: {source}")]
    ReleasePod {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot create the benchmark's NetworkPolicy: {0}")]
    CreateNetworkPolicy(#[source] network_policy::EnsureError),
    #[error("cannot create the benchmark's engine password Secret: {0}")]
    CreateEnginePassword(#[source] engine_password::EnsureError),
    #[error("cannot read the profile's ConfigMap: {0}")]
    ReadProfile(#[source] kube::Error),
    #[error("cannot read the RDB file's PersistentVolumeClaim: {0}")]
    ReadClaim(#[source] kube::Error),
}

impl Error {
    /// A short, bounded category for metric labels.
    pub fn category(&self) -> &'static str {
        match self {
            Error::ListPods(_) => "ListPods",
            Error::CreatePod { .. } => "CreatePod",
            Error::DeletePod { .. } => "DeletePod",
            Error::WriteStatus(_) => "WriteStatus",
            Error::ReadBenchmark(_) => "ReadBenchmark",
            Error::ReleasePod { .. } => "ReleasePod",
            Error::ReadProfile(_) => "ReadProfile",
            Error::ReadClaim(_) => "ReadClaim",
            Error::CreateNetworkPolicy(_) => "CreateNetworkPolicy",
            Error::CreateEnginePassword(_) => "CreateEnginePassword",
        }
    }
}
