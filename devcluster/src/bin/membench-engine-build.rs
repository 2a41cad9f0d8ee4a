//! `membench-engine-build`: which engine store build stands in for an engine image on a node of
//! an architecture, chosen exactly as the node agent chooses when it "pulls" that image. The dev
//! cluster's real nodes run real images, which `hack/engine-image.sh` builds from the build this
//! names, so a real node and a fake one run the same server for the same tag. Test
//! infrastructure, not something users run.
#![forbid(unsafe_code)]

use std::path::PathBuf;

use clap::Parser;
use membench_devcluster::agent::images::ImageResolver;
use membench_enginestore::{EngineStore, store_arch};

/// Prints the engine store build an engine image stands for (`KEY=value` lines: engine, build,
/// version, path, preload), or with --list every engine image the store has a build for.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// An engine image as the operator names it: `redis:8.2.3`, `valkey/valkey:9.1.2`,
    /// `docker.dragonflydb.io/dragonflydb/dragonfly:v1.40.0`.
    #[arg(required_unless_present = "list")]
    image: Option<String>,

    /// List every engine image (one exact version each) the store has a build for.
    #[arg(long, conflicts_with = "image")]
    list: bool,

    /// The node's architecture (`kubernetes.io/arch`: amd64, arm64).
    #[arg(long, default_value = "amd64")]
    arch: String,

    /// The engine store (hack/install-engines.sh).
    #[arg(long, env = membench_enginestore::ROOT_ENV, default_value_os_t = EngineStore::default_root())]
    engine_store: PathBuf,
}

/// The image the operator runs for an engine at a version (its `EngineSpec::image`).
fn image_name(engine: &str, version: &str) -> Option<String> {
    match engine {
        "redis" => Some(format!("redis:{version}")),
        "valkey" => Some(format!("valkey/valkey:{version}")),
        "dragonfly" => Some(format!(
            "docker.dragonflydb.io/dragonflydb/dragonfly:v{version}"
        )),
        _ => None,
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.list {
        let arch = store_arch(&args.arch)
            .ok_or_else(|| anyhow::anyhow!("unknown architecture {:?}", args.arch))?;
        let store = EngineStore::open(&args.engine_store)?;
        let mut images: Vec<String> = store
            .builds()
            .iter()
            .filter(|b| b.arch == arch)
            .filter_map(|b| image_name(&b.engine, &b.version))
            .collect();
        images.sort();
        images.dedup();
        for image in images {
            println!("{image}");
        }
        return Ok(());
    }
    let image = args.image.expect("clap requires an image without --list");
    let resolver = ImageResolver::new(args.engine_store, None, None);
    let pulled = resolver.pull(&image, &args.arch)?;
    anyhow::ensure!(
        pulled.wrapper.is_empty(),
        "image {image:?} for {}: the store's build {} runs under an emulator ({}); a real \
         node runs native builds only",
        args.arch,
        pulled.build.as_deref().unwrap_or("?"),
        pulled.wrapper.join(" ")
    );
    let engine = pulled
        .kind
        .server_program()
        .ok_or_else(|| anyhow::anyhow!("{image:?} is not an engine image"))?;
    println!("server={engine}");
    println!("build={}", pulled.build.unwrap_or_default());
    println!("path={}", pulled.entrypoint.display());
    println!(
        "preload={}",
        pulled
            .ld_preload
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    Ok(())
}
