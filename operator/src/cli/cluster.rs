//! What the commands that talk to a cluster share: kubectl's `--context`, and one way of saying
//! that there is no cluster to talk to.

use clap::Args;

/// The file name kubectl runs as the plugin `kubectl membench`.
pub const KUBECTL_PLUGIN: &str = "kubectl-membench";

/// The kubeconfig context, as kubectl's flag of the same name.
#[derive(Args, Clone, Debug, Default)]
pub struct ContextArgs {
    /// The kubeconfig context to use (default: its current context), as `kubectl --context`.
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
}

impl ContextArgs {
    /// A client for the context asked for; without one, the pod's service account in a
    /// cluster, else the kubeconfig's current context. The error says once what was tried.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let config = match &self.context {
            Some(context) => {
                let options = kube::config::KubeConfigOptions {
                    context: Some(context.clone()),
                    ..Default::default()
                };
                kube::Config::from_kubeconfig(&options).await.map_err(|e| {
                    anyhow::anyhow!("cannot use the kubeconfig context {context:?}: {e}")
                })?
            }
            None => kube::Config::infer().await.map_err(no_cluster)?,
        };
        Ok(kube::Client::try_from(config)?)
    }
}

/// Neither in a pod nor with a kubeconfig: one sentence, not the chain of every attempt (each
/// of which repeats the kubeconfig's error).
fn no_cluster(e: kube::config::InferConfigError) -> anyhow::Error {
    // The kubeconfig's failure is the source; the in-pod attempt only says this is no pod.
    let why = std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string);
    anyhow::anyhow!(
        "no cluster to talk to: not in a pod, and no usable kubeconfig ({why}). Point KUBECONFIG at a cluster's kubeconfig, or pass --context"
    )
}
