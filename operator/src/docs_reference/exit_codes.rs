//! The exit codes page, from [`ExitStatus`]: the table the binary exits with and `--help`
//! prints.

use crate::error::ExitStatus;

use super::{header, table_cell};

/// The exit codes reference page.
pub fn exit_codes_page() -> String {
    let mut page = header(
        "exit-codes",
        "Exit codes",
        "the ExitStatus table in operator/src/error.rs (each status's doc comment)",
    );
    page.push_str(
        "Every command exits with one of these (`membench --help` lists them too).\n\n\
         | code | meaning |\n|---|---|\n",
    );
    for &status in ExitStatus::ALL {
        page.push_str(&format!(
            "| {} | {} |\n",
            status.code(),
            table_cell(status.meaning())
        ));
    }
    page
}
