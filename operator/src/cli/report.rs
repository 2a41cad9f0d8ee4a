//! `membench report`: the comparison of finished MemoryBenchmarks in the cluster.

use membench::error::ExitStatus;
use std::process::ExitCode;

use clap::Args;

use super::ComparisonOutput;
use super::cluster::ContextArgs;

#[derive(Args)]
pub struct ReportArgs {
    /// The benchmarks to report (default: every finished one in the namespace).
    names: Vec<String>,
    /// The namespace (default: the kubeconfig's).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// Every namespace.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    all_namespaces: bool,
    #[command(flatten)]
    context: ContextArgs,
    /// How to print the comparison (html: one self-contained page with the charts).
    #[arg(long, value_enum, default_value = "table")]
    output: ComparisonOutput,
}

pub fn run_report(args: ReportArgs) -> ExitCode {
    use kube::ResourceExt;
    use membench::crd::MemoryBenchmark;
    use membench::report::cluster::{comparison, finished, render};

    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let result: anyhow::Result<Vec<MemoryBenchmark>> = runtime.block_on(async {
        let client = args.context.client().await?;
        let api: kube::Api<MemoryBenchmark> = if args.all_namespaces {
            kube::Api::all(client)
        } else {
            let namespace = args
                .namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_string());
            kube::Api::namespaced(client, &namespace)
        };
        if args.names.is_empty() {
            let mut all = api.list(&Default::default()).await?.items;
            all.retain(|b| {
                let done = finished(b);
                if !done {
                    eprintln!(
                        "note: {} has not finished yet; name it to see its partial results",
                        b.name_any()
                    );
                }
                done
            });
            Ok(all)
        } else {
            let mut found = Vec::new();
            for name in &args.names {
                found.push(
                    api.get(name)
                        .await
                        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?,
                );
            }
            Ok(found)
        }
    });
    match result {
        Ok(benchmarks) => {
            if benchmarks.is_empty() && args.output != ComparisonOutput::Json {
                eprintln!("no finished MemoryBenchmarks found");
                return ExitCode::SUCCESS;
            }
            match args.output.text() {
                Some(format) => {
                    let comparisons: Vec<_> = benchmarks.iter().map(comparison).collect();
                    print!("{}", render(&comparisons, format));
                }
                None => {
                    let sections: Vec<_> = benchmarks
                        .iter()
                        .map(membench::report::html::section_from_status)
                        .collect();
                    print!(
                        "{}",
                        membench::report::html::render_page("membench report", &sections)
                    );
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitStatus::Failed.into()
        }
    }
}
