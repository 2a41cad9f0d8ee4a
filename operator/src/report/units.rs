//! How a figure reads in a report, below every rendering that shows one: bytes in decimal
//! units (`format_bytes`, also reachable as `report::table::format_bytes`).

/// Bytes in decimal units, as the published tables give used_memory ("4.83 GB").
pub fn format_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = bytes;
    let mut unit = 0;
    while value.abs() >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}
