//! The CustomResourceDefinition as the API server is given it: kube's derived CRD with each
//! integer's `format` one Kubernetes knows. schemars writes `uint32` and `uint64` for unsigned
//! fields (beside `minimum: 0`); the API server does not know them and warns on every create
//! and update of a MemoryBenchmark (`Warning: unrecognized format "uint64"`), so every
//! `kubectl apply` of a spec printed two warnings. They become `int64`, which holds every
//! `u32` and every `u64` a spec or status uses; `minimum: 0` still says they are unsigned.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use super::spec::MemoryBenchmark;

/// The formats the API server's schema validation knows (apiextensions-apiserver's
/// `supportedFormats`); any other is warned about.
pub const KNOWN_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "date-time",
    "int32",
    "int64",
    "float",
    "double",
];

/// The MemoryBenchmark CRD, with unsigned integer formats written as `int64`.
pub fn definition() -> CustomResourceDefinition {
    let mut value = serde_json::to_value(MemoryBenchmark::crd()).expect("the CRD serializes");
    known_integer_formats(&mut value);
    serde_json::from_value(value).expect("the CRD reads back")
}

/// Every `format: uintN` below `value` becomes `int64`.
fn known_integer_formats(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::String(format)) = map.get_mut("format")
                && format.starts_with("uint")
            {
                *format = "int64".into();
            }
            map.values_mut().for_each(known_integer_formats);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(known_integer_formats),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn formats(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::String(format)) = map.get("format") {
                    out.push(format.clone());
                }
                map.values().for_each(|v| formats(v, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| formats(v, out)),
            _ => {}
        }
    }

    #[test]
    fn every_format_in_the_crd_is_one_the_api_server_knows() {
        let crd = serde_json::to_value(definition()).unwrap();
        let mut found = Vec::new();
        formats(&crd, &mut found);
        // The derived CRD has many unsigned fields: a walk that found none checked nothing.
        assert!(
            found.iter().filter(|f| *f == "int64").count() >= 100,
            "{found:?}"
        );
        let unknown: Vec<&String> = found
            .iter()
            .filter(|f| !KNOWN_FORMATS.contains(&f.as_str()))
            .collect();
        assert!(
            unknown.is_empty(),
            "formats the API server warns about: {unknown:?}"
        );
    }

    #[test]
    fn an_unsigned_field_keeps_its_minimum() {
        let crd = serde_json::to_value(definition()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(spec["repetitions"]["format"], "int64");
        assert_eq!(spec["repetitions"]["minimum"], 1.0);
    }
}
