//! Several profiles as one: the primaries of a cluster profiled one by one (`membench profile
//! --cluster`) make one keyspace. Totals add up (keys, sampled keys, used_memory); each group's
//! share is its part of all the keys; a group found on several nodes (same template and type)
//! is one group whose distributions and shares are merged by weight, a node's sampled key
//! standing for `keys / sampledKeys` of its keys.

use std::collections::BTreeMap;

use super::model::{
    Distribution, KeyGroup, MAX_BUCKETS, MAX_OBJECT_FIELDS, ObjectField, PROFILE_FORMAT, Profile,
    ProfileSource, TtlShape, ValueShape,
};

/// One part of a merged distribution, share or shape: its value and its weight.
type Weighted<'a, T> = (&'a T, f64);

/// The weighted mean of shares.
fn share(parts: &[(f64, f64)]) -> f64 {
    let weight: f64 = parts.iter().map(|(_, w)| w).sum();
    if weight <= 0.0 {
        return 0.0;
    }
    parts.iter().map(|(s, w)| s * w).sum::<f64>() / weight
}

/// Distributions merged by weight: every bucket's observations count `weight` times, spread
/// evenly over its range where ranges of two parts overlap; more than [`MAX_BUCKETS`] pieces
/// become ranges of about equal counts again.
pub fn merge_distributions(parts: &[Weighted<Distribution>]) -> Distribution {
    let mut points: Vec<u64> = parts
        .iter()
        .flat_map(|(d, _)| {
            d.buckets
                .iter()
                .flat_map(|b| [b[0], b[1].saturating_add(1)])
        })
        .collect();
    points.sort_unstable();
    points.dedup();
    let mut pieces: Vec<[f64; 3]> = Vec::new();
    for pair in points.windows(2) {
        let (min, max) = (pair[0], pair[1] - 1);
        let mut count = 0.0;
        for (d, weight) in parts {
            for [lo, hi, n] in &d.buckets {
                if *lo <= min && max <= *hi {
                    let width = (max - min + 1) as f64 / (hi - lo + 1) as f64;
                    count += *n as f64 * weight * width;
                }
            }
        }
        if count > 0.0 {
            pieces.push([min as f64, max as f64, count]);
        }
    }
    let total: f64 = pieces.iter().map(|p| p[2]).sum();
    let per_bucket = if pieces.len() <= MAX_BUCKETS {
        0.0
    } else {
        total / MAX_BUCKETS as f64
    };
    let mut buckets: Vec<[u64; 3]> = Vec::new();
    let mut current: Option<[f64; 3]> = None;
    for [min, max, count] in pieces {
        let bucket = current.get_or_insert([min, max, 0.0]);
        bucket[1] = max;
        bucket[2] += count;
        if bucket[2] >= per_bucket {
            let [min, max, count] = current.take().expect("a bucket under way");
            buckets.push([min as u64, max as u64, (count.round() as u64).max(1)]);
        }
    }
    if let Some([min, max, count]) = current {
        buckets.push([min as u64, max as u64, (count.round() as u64).max(1)]);
    }
    Distribution { buckets }
}

/// `merge` of the parts that have a value; `None` when none has.
fn merge_present<T, U>(
    parts: &[(Option<&T>, f64)],
    merge: impl Fn(&[Weighted<T>]) -> U,
) -> Option<U> {
    let present: Vec<Weighted<T>> = parts
        .iter()
        .filter_map(|(v, w)| Some(((*v)?, *w)))
        .collect();
    (!present.is_empty()).then(|| merge(&present))
}

fn merge_optional(parts: &[(Option<&Distribution>, f64)]) -> Option<Distribution> {
    merge_present(parts, merge_distributions)
}

fn merge_values(parts: &[Weighted<ValueShape>]) -> ValueShape {
    let of = |f: fn(&ValueShape) -> f64| {
        share(&parts.iter().map(|(v, w)| (f(v), *w)).collect::<Vec<_>>())
    };
    ValueShape {
        integer_keys: of(|v| v.integer_keys),
        integer_share: of(|v| v.integer_share),
        negative_share: of(|v| v.negative_share),
        text_length: merge_optional(
            &parts
                .iter()
                .map(|(v, w)| (v.text_length.as_ref(), *w))
                .collect::<Vec<_>>(),
        ),
        integer_length: merge_optional(
            &parts
                .iter()
                .map(|(v, w)| (v.integer_length.as_ref(), *w))
                .collect::<Vec<_>>(),
        ),
        key_mean_length: merge_optional(
            &parts
                .iter()
                .map(|(v, w)| (v.key_mean_length.as_ref(), *w))
                .collect::<Vec<_>>(),
        ),
    }
}

fn merge_optional_values(parts: &[(Option<&ValueShape>, f64)]) -> Option<ValueShape> {
    merge_present(parts, merge_values)
}

/// The object fields of a group's parts: by name, a field's share weighed by the keys each
/// part stands for (0 where a part lacks it), its values by the observations. None when a
/// part has none (its keys are no objects there) or the names add up past the most kept.
fn merge_object_fields(
    parts: &[Weighted<KeyGroup>],
    observed: &[Weighted<KeyGroup>],
) -> Vec<ObjectField> {
    if parts.iter().any(|(g, _)| g.object_fields.is_empty()) {
        return Vec::new();
    }
    let mut names: Vec<&str> = parts
        .iter()
        .flat_map(|(g, _)| g.object_fields.iter().map(|f| f.name.as_str()))
        .collect();
    names.sort_unstable();
    names.dedup();
    if names.len() > MAX_OBJECT_FIELDS {
        return Vec::new();
    }
    let field_of =
        |g: &KeyGroup, name: &str| g.object_fields.iter().find(|f| f.name == name).cloned();
    names
        .into_iter()
        .map(|name| {
            let shares: Vec<(f64, f64)> = parts
                .iter()
                .map(|(g, w)| (field_of(g, name).map_or(0.0, |f| f.share), *w))
                .collect();
            let held: Vec<(ObjectField, f64)> = observed
                .iter()
                .filter_map(|(g, w)| Some((field_of(g, name)?, w * g.sampled_keys as f64)))
                .collect();
            let values: Vec<Weighted<ValueShape>> =
                held.iter().map(|(f, w)| (&f.values, w * f.share)).collect();
            ObjectField {
                name: name.to_string(),
                share: share(&shares),
                values: merge_values(&values),
            }
        })
        .collect()
}

/// One group from its parts, each weighted by the keys it stands for. A distribution counts
/// observations: a part's count by the keys each of its sampled keys stands for, times
/// `sampled_per_key` (all the profiles' sampled keys over all their keys), so that the merged
/// counts stay those of a sample.
fn merge_group(parts: &[Weighted<KeyGroup>], total_keys: f64, sampled_per_key: f64) -> KeyGroup {
    let first = parts[0].0;
    let observed: Vec<Weighted<KeyGroup>> = parts
        .iter()
        .map(|(g, w)| (*g, w / g.sampled_keys.max(1) as f64 * sampled_per_key))
        .collect();
    let ttl_share = share(
        &parts
            .iter()
            .map(|(g, w)| (g.ttl.as_ref().map_or(0.0, |t| t.share), *w))
            .collect::<Vec<_>>(),
    );
    let ttl_millis = merge_optional(
        &observed
            .iter()
            .map(|(g, w)| (g.ttl.as_ref().and_then(|t| t.millis.as_ref()), *w))
            .collect::<Vec<_>>(),
    );
    let mut encodings: BTreeMap<String, f64> = BTreeMap::new();
    let encoded_weight: f64 = parts
        .iter()
        .filter(|(g, _)| !g.encodings.is_empty())
        .map(|(_, w)| w)
        .sum();
    for (g, w) in parts {
        for (name, s) in &g.encodings {
            *encodings.entry(name.clone()).or_default() += s * w / encoded_weight;
        }
    }
    // Key lengths and element counts are counted over every key a walk found (in a profile
    // before the walk, over the sampled keys): each part weighs by the keys one of its
    // observations stands for.
    let per_key_distribution = |f: fn(&KeyGroup) -> Option<&Distribution>| {
        merge_optional(
            &parts
                .iter()
                .map(|(g, w)| {
                    let d = f(g);
                    let observations = d.map_or(1, Distribution::observations).max(1);
                    (d, w / observations as f64 * sampled_per_key)
                })
                .collect::<Vec<_>>(),
        )
    };
    // Shares weigh alike whatever the scale: by observations too.
    let values = |f: fn(&KeyGroup) -> Option<&ValueShape>| {
        merge_optional_values(&observed.iter().map(|(g, w)| (f(g), *w)).collect::<Vec<_>>())
    };
    let weight: f64 = parts.iter().map(|(_, w)| w).sum();
    let sampled_keys: u64 = parts.iter().map(|(g, _)| g.sampled_keys).sum();
    let keys: u64 = if parts.iter().all(|(g, _)| g.keys > 0) {
        parts.iter().map(|(g, _)| g.keys).sum()
    } else {
        0
    };
    // The parts' errors are independent: the sum's is their root sum of squares, by weight.
    let size_error = parts
        .iter()
        .map(|(g, w)| g.size_error.map(|e| (e * w).powi(2)))
        .sum::<Option<f64>>()
        .map(|sum| sum.sqrt() / weight);
    KeyGroup {
        template: first.template.clone(),
        key_type: first.key_type,
        share: weight / total_keys,
        sampled_keys,
        keys,
        big_key: first.big_key,
        sampled_share: (keys > 0).then(|| sampled_keys as f64 / keys as f64),
        size_error,
        key_length: per_key_distribution(|g| Some(&g.key_length))
            .expect("every group has key lengths"),
        ttl: (ttl_share > 0.0).then_some(TtlShape {
            share: ttl_share,
            millis: ttl_millis,
        }),
        encodings,
        elements: per_key_distribution(|g| g.elements.as_ref()),
        entry_fields: merge_optional(
            &observed
                .iter()
                .map(|(g, w)| (g.entry_fields.as_ref(), *w))
                .collect::<Vec<_>>(),
        ),
        fields: values(|g| g.fields.as_ref()),
        values: values(|g| Some(&g.values)).expect("every group has values"),
        scores: values(|g| g.scores.as_ref()),
        object_fields: merge_object_fields(parts, &observed),
    }
}

/// The profiles of several nodes as the profile of one keyspace. `labels[i]` names node `i`
/// in the notes (its address).
pub fn merge_profiles(profiles: &[Profile], labels: &[String]) -> Profile {
    let total_keys: u64 = profiles.iter().map(|p| p.source.keys).sum();
    // A big key is one key of one node: never merged with another group.
    let mut parts: BTreeMap<(String, super::model::KeyType, usize), Vec<Weighted<KeyGroup>>> =
        BTreeMap::new();
    let mut big_keys = 0;
    for profile in profiles {
        // Each group's share of this node's keys, as keys.
        for group in &profile.groups {
            let big = if group.big_key {
                big_keys += 1;
                big_keys
            } else {
                0
            };
            parts
                .entry((group.template.clone(), group.key_type, big))
                .or_default()
                .push((group, group.share * profile.source.keys as f64));
        }
    }
    let sampled: u64 = profiles.iter().map(|p| p.source.sampled_keys).sum();
    let sampled_per_key = sampled.max(1) as f64 / total_keys.max(1) as f64;
    let mut groups: Vec<KeyGroup> = parts
        .values()
        .map(|parts| merge_group(parts, total_keys as f64, sampled_per_key))
        .collect();
    groups.sort_by(|a, b| b.share.total_cmp(&a.share));
    let sources: Vec<&ProfileSource> = profiles.iter().map(|p| &p.source).collect();
    let stopped: Vec<String> = sources
        .iter()
        .zip(labels)
        .filter_map(|(s, label)| Some(format!("{label}: {}", s.stopped_by.as_ref()?)))
        .collect();
    let mut keysizes = BTreeMap::new();
    for (source, label) in sources.iter().zip(labels) {
        for (name, value) in &source.keysizes {
            keysizes.insert(format!("{label} {name}"), value.clone());
        }
    }
    let mut notes = vec![format!(
        "{} primaries of a cluster profiled one after the other (--cluster), {}",
        profiles.len(),
        sources
            .iter()
            .zip(labels)
            .map(|(s, label)| format!("{label} {} of {} keys sampled", s.sampled_keys, s.keys))
            .collect::<Vec<_>>()
            .join(", ")
    )];
    for (profile, label) in profiles.iter().zip(labels) {
        notes.extend(profile.notes.iter().map(|n| format!("{label}: {n}")));
    }
    Profile {
        format: PROFILE_FORMAT,
        source: ProfileSource {
            engine: sources[0].engine.clone(),
            version: sources[0].version.clone(),
            db: sources[0].db,
            keys: total_keys,
            sampled_keys: sources.iter().map(|s| s.sampled_keys).sum(),
            complete: sources.iter().all(|s| s.complete),
            stopped_by: (!stopped.is_empty()).then(|| stopped.join("; ")),
            used_memory: sources.iter().map(|s| s.used_memory).sum(),
            keysizes,
            primaries: profiles.len() as u32,
        },
        groups,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_merge_by_weight_and_overlapping_ranges_split_evenly() {
        let a = Distribution {
            buckets: vec![[3, 3, 10]],
        };
        let b = Distribution {
            buckets: vec![[3, 3, 10], [10, 19, 10]],
        };
        let merged = merge_distributions(&[(&a, 3.0), (&b, 1.0)]);
        assert_eq!(merged.buckets, vec![[3, 3, 40], [10, 19, 10]]);
        let c = Distribution {
            buckets: vec![[15, 24, 20]],
        };
        let merged = merge_distributions(&[(&b, 1.0), (&c, 1.0)]);
        // 10-19 and 15-24 overlap on 15-19: half of each lands there.
        assert_eq!(
            merged.buckets,
            vec![[3, 3, 10], [10, 14, 5], [15, 19, 15], [20, 24, 10]]
        );
        let many = Distribution {
            buckets: (0..200).map(|v| [v, v, 1]).collect(),
        };
        let merged = merge_distributions(&[(&many, 1.0)]);
        assert!(
            merged.buckets.len() <= MAX_BUCKETS,
            "{}",
            merged.buckets.len()
        );
        assert_eq!(merged.observations(), 200);
    }
}
