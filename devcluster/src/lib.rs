//! membench's dev cluster: a real Kubernetes control plane on this machine, and the node agent
//! that runs its fake nodes' pods as local processes.
//!
//! - [`cluster`]: a client for the test cluster ([`DevCluster::ensure`]): the dev cluster,
//!   started through `hack/dev-cluster.sh up`, or the cluster named by
//!   `MEMBENCH_TEST_KUBECONFIG`.
//! - [`wait`]: test helpers (a namespace per test, waiting for pod conditions).
//! - [`faults`]: faults a test injects (a node that appears, one that stops reporting, an API
//!   server restart).
//! - [`pod_security`]: the Pod Security Standard `restricted` the tests' namespaces enforce.
//! - [`real_nodes`]: the real nodes (kubelet, containerd, runc) tests ask for when the
//!   behaviour under test is the node's.
//! - [`registry`]: the image registry the real nodes pull from (its address, image names, pull
//!   Secrets, and the requests its log shows).
//! - [`tools`]: the tools `hack/build-tools.sh` builds (kubectl), for tests that run them.
//! - [`agent`]: the node agent (the `membench-node-agent` binary), which stands in for kubelet
//!   and a container runtime. Test infrastructure, never deployed to users.
//!
//! This is its own crate, apart from `operator/`, because it is the test harness: the
//! operator's code must not depend on it, and its tests may.
#![forbid(unsafe_code)]

pub mod agent;
pub mod cluster;
pub mod faults;
pub mod pod_security;
pub mod real_nodes;
pub mod registry;
pub mod tools;
pub mod wait;

pub use cluster::{DevCluster, EnsureOptions, TEST_KUBECONFIG_ENV};
