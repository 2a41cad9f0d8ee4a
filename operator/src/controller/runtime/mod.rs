//! Running the controller: its scope, the loop kube-rs drives, and leader election among
//! several operator replicas.

pub mod leader;
pub(crate) mod running;
