//! What the operator lets a MemoryBenchmark's author do with the operator's pod rights. Whoever
//! may create a MemoryBenchmark gets pods created for them, so the operator runs only the
//! engine images its administrators allow, takes only the memory-relevant settings of
//! `engines[].config` in server arguments (`validation::engine_config`; nothing that would open
//! an engine to the cluster again, move its files or load code), and refuses tolerations that would let benchmark pods onto every
//! tainted node. Each refusal is a `PolicyDenied` [`SpecError`] naming the field and the
//! operator setting that would allow it. Pure: checked by [`super::plan::plan`] after the spec's own validation.

use super::spec_error::SpecError;
use crate::controller::build::engine_registry::{EngineRegistry, engine_image};
use crate::crd::MemoryBenchmarkSpec;
use crate::validation::engine_config::{ArgsRefusal, check_args};

/// The official images of each engine, by repository: any tag or digest of these.
pub const OFFICIAL_IMAGES: [&str; 6] = [
    "redis",
    "docker.io/library/redis",
    "valkey/valkey",
    "docker.io/valkey/valkey",
    "docker.dragonflydb.io/dragonflydb/dragonfly",
    "ghcr.io/dragonflydb/dragonfly",
];

/// The operator's settings for what a spec may ask for.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Image patterns engines may run (`--allowed-images`, chart value `allowedImages`): a
    /// pattern names a repository, `*` standing for any characters but `/`, and allows every
    /// tag and digest of it; a pattern with a tag or digest (`redis:7.4.1`) allows only that.
    pub allowed_images: Vec<String>,
    /// Allow any server arguments, those that open an engine again included
    /// (`--allow-open-engine-args`); without it, args take the settings of `config` only.
    pub allow_open_engine_args: bool,
    /// Allow tolerations without a key (`--allow-tolerate-everything`).
    pub allow_tolerate_everything: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            allowed_images: OFFICIAL_IMAGES.iter().map(|p| p.to_string()).collect(),
            allow_open_engine_args: false,
            allow_tolerate_everything: false,
        }
    }
}

impl Policy {
    /// The image patterns the operator allows: `given` (`--allowed-images`; blank patterns
    /// dropped) or the official images, and with an engine mirror (`--engine-registry`) its
    /// repositories too, so that the images it rewrites every engine to are allowed without
    /// naming them again.
    pub fn allowed_images_with(
        given: Option<Vec<String>>,
        registry: Option<&EngineRegistry>,
    ) -> Vec<String> {
        let mut allowed: Vec<String> = match given {
            Some(patterns) => patterns
                .into_iter()
                .filter(|p| !p.trim().is_empty())
                .collect(),
            None => Self::default().allowed_images,
        };
        if let Some(registry) = registry {
            allowed.extend(registry.allowed_patterns());
        }
        allowed
    }

    /// Whether `image` matches one of the allowed patterns.
    pub fn image_allowed(&self, image: &str) -> bool {
        self.allowed_images
            .iter()
            .any(|pattern| image_matches(pattern, image))
    }

    /// Checks a spec against the policy, its engines' images as they run without an engine
    /// mirror; the error names the field and the setting.
    pub fn check(&self, spec: &MemoryBenchmarkSpec) -> Result<(), SpecError> {
        self.check_with(spec, None)
    }

    /// [`Policy::check`], the official images pulled from `registry` when the operator has an
    /// engine mirror (whose repositories the operator adds to `allowed_images`).
    pub fn check_with(
        &self,
        spec: &MemoryBenchmarkSpec,
        registry: Option<&EngineRegistry>,
    ) -> Result<(), SpecError> {
        for (i, engine) in spec.engines.iter().enumerate() {
            let image = engine_image(engine, registry);
            if !self.image_allowed(&image) {
                let field = match (&engine.image, registry) {
                    (Some(_), _) => format!("spec.engines[{i}].image"),
                    (None, Some(_)) => format!(
                        "spec.engines[{i}] (its official image from the engine mirror, engineRegistry)"
                    ),
                    (None, None) => format!("spec.engines[{i}] (its official image)"),
                };
                return Err(SpecError::PolicyDenied {
                    field,
                    message: format!(
                        "the image {image} is not allowed here: this operator runs only images matching its allowedImages setting ({}); use one of those, or ask the operator's administrators to add a pattern to the chart value allowedImages (flag --allowed-images)",
                        self.allowed_images.join(", ")
                    ),
                });
            }
            if !self.allow_open_engine_args
                && let Err(refusal) = check_args(engine.engine, &engine.args)
            {
                let why = match refusal {
                    ArgsRefusal::Unreadable(why) => why,
                    ArgsRefusal::Opening { written, why } => {
                        format!("'{written}' would open the engine again ({why})")
                    }
                    ArgsRefusal::NotAllowed { written, allowed } => format!(
                        "'{written}' is not a memory-relevant setting; args take the settings of engines[].config: {allowed}"
                    ),
                    ArgsRefusal::BadValue { written, takes } => {
                        format!("'{written}': the setting takes {takes}")
                    }
                };
                return Err(SpecError::PolicyDenied {
                    field: format!("spec.engines[{i}].args"),
                    message: format!(
                        "{why}; this operator refuses it unless started with --allow-open-engine-args (chart value allowOpenEngineArgs: true)"
                    ),
                });
            }
        }
        if !self.allow_tolerate_everything {
            let tolerations = spec.placement.iter().flat_map(|p| p.tolerations.iter());
            for (i, toleration) in tolerations.enumerate() {
                if toleration.key.as_deref().unwrap_or_default().is_empty() {
                    return Err(SpecError::PolicyDenied {
                        field: format!("spec.placement.tolerations[{i}]"),
                        message: "it tolerates every taint (operator Exists without a key), which would let benchmark pods onto control-plane and other reserved nodes; name the taint key of your benchmark nodes, or ask the operator's administrators to allow it with the chart value allowTolerateEverything: true (flag --allow-tolerate-everything)".into(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// The repository of an image reference: without its digest and tag.
fn repository(image: &str) -> &str {
    let without_digest = image.split_once('@').map_or(image, |(r, _)| r);
    match without_digest.rfind(':') {
        // A colon after the last slash starts the tag; before it, it is a registry's port.
        Some(colon) if !without_digest[colon..].contains('/') => &without_digest[..colon],
        _ => without_digest,
    }
}

/// Whether `image` matches `pattern` (see [`Policy::allowed_images`]).
pub fn image_matches(pattern: &str, image: &str) -> bool {
    let names_a_version = pattern.contains('@') || repository(pattern) != pattern;
    let subject = if names_a_version {
        image
    } else {
        repository(image)
    };
    glob(pattern.as_bytes(), subject.as_bytes())
}

/// `*` matches any run of characters except `/`; everything else matches itself.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => {
            // Every split of the segment, shortest first: patterns and images are short.
            let segment = text.iter().position(|&c| c == b'/').unwrap_or(text.len());
            (0..=segment).any(|taken| glob(rest, &text[taken..]))
        }
        Some((c, rest)) => text.first() == Some(c) && glob(rest, &text[1..]),
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
