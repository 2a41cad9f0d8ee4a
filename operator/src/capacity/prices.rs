//! The user's prices: CSV lines `instanceType,hourlyUSD`. membench ships no price of its own
//! and shows none it was not given.

use std::collections::BTreeMap;

use super::instance_types;

/// Hours in a month as AWS's pricing pages count them (365 * 24 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// Hourly on-demand prices in USD, by instance type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prices {
    /// Where they came from (a file's path, a ConfigMap's name), for reports.
    pub source: String,
    pub hourly_usd: BTreeMap<String, f64>,
}

impl Prices {
    /// Reads the CSV `text` from `source`. Blank lines and lines starting with `#` are skipped,
    /// as is a header line `instanceType,hourlyUSD`. Every other line is an instance type the
    /// table knows, a comma, and a price in USD per hour above zero; anything else is an error
    /// naming the line.
    pub fn parse(source: &str, text: &str) -> Result<Self, String> {
        let mut hourly_usd = BTreeMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line_no = index + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |what: String| format!("{source} line {line_no}: {what}");
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if fields.len() != 2 {
                return Err(at(format!(
                    "expected two fields `instanceType,hourlyUSD`, found {} in '{line}'",
                    fields.len()
                )));
            }
            if fields[0].eq_ignore_ascii_case("instanceType") {
                continue;
            }
            let name = instance_types::lookup(fields[0]).map_err(&at)?.name.clone();
            let price: f64 = fields[1].parse().map_err(|_| {
                at(format!(
                    "'{}' is not a price: give USD per hour as a number, for example 1.0248",
                    fields[1]
                ))
            })?;
            if !price.is_finite() || price <= 0.0 {
                return Err(at(format!(
                    "the price of {name} must be above 0 USD per hour, not {}",
                    fields[1]
                )));
            }
            if hourly_usd.insert(name.clone(), price).is_some() {
                return Err(at(format!("{name} is priced a second time")));
            }
        }
        if hourly_usd.is_empty() {
            return Err(format!(
                "{source}: no prices: give one line `instanceType,hourlyUSD` per instance type"
            ));
        }
        Ok(Self {
            source: source.to_string(),
            hourly_usd,
        })
    }

    /// Reads a prices file.
    pub fn read(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the prices file {}: {e}", path.display()))?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// The monthly cost of one node of `instance_type`, when a price was given for it.
    pub fn monthly_usd(&self, instance_type: &str) -> Option<f64> {
        self.hourly_usd
            .get(instance_type)
            .map(|h| h * HOURS_PER_MONTH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_example_file_parses_and_says_it_is_an_example() {
        let text = include_str!("../../../manifests/examples/prices.example.csv");
        let first = text.lines().next().unwrap();
        assert!(
            first.starts_with('#') && first.to_lowercase().contains("example"),
            "{first}"
        );
        let prices = Prices::parse("prices.example.csv", text).unwrap();
        assert!(prices.hourly_usd.len() >= 5);
    }

    #[test]
    fn a_bad_line_is_an_error_naming_the_line_and_what_is_wrong() {
        let cases = [
            ("r8g.large,0.1\nr8g.xlarge\n", "line 2: expected two fields"),
            ("r8g.large,cheap\n", "line 1: 'cheap' is not a price"),
            (
                "# c\nr8g.large,-1\n",
                "line 2: the price of r8g.large must be above 0",
            ),
            (
                "r8g.large,1\nr8g.large,2\n",
                "line 2: r8g.large is priced a second time",
            ),
            ("m7g.large,1\n", "line 1: unknown instance type 'm7g.large'"),
            ("# only a comment\n", "no prices"),
        ];
        for (text, expected) in cases {
            let err = Prices::parse("p.csv", text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
        let ok = Prices::parse("p.csv", "instanceType,hourlyUSD\nr7i.large, 0.5\n").unwrap();
        assert_eq!(ok.monthly_usd("r7i.large"), Some(365.0));
        assert_eq!(ok.monthly_usd("r7i.xlarge"), None);
    }
}
