//! The engine's keys by type in one database, as the `rdb` workload's verification reads them.

use std::collections::BTreeMap;

use crate::client::connection::engine::ControlConnection;
use crate::error::BenchError;

/// Keys by type in database `db`, by one `SCAN ... TYPE` per type (the control
/// connection is back on database 0 afterwards).
pub fn keys_by_type(
    control: &mut ControlConnection,
    db: u64,
) -> Result<BTreeMap<String, u64>, BenchError> {
    if db != 0 {
        control.query::<()>(redis::cmd("SELECT").arg(db))?;
    }
    let mut counts = BTreeMap::new();
    let counted = (|| {
        for type_name in ["string", "list", "set", "zset", "hash", "stream"] {
            let mut cursor = 0u64;
            let mut n = 0u64;
            loop {
                let (next, keys): (u64, Vec<redis::Value>) = control.query(
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("COUNT")
                        .arg(1000)
                        .arg("TYPE")
                        .arg(type_name),
                )?;
                n += keys.len() as u64;
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
            if n > 0 {
                counts.insert(type_name.to_string(), n);
            }
        }
        Ok::<(), BenchError>(())
    })();
    if db != 0 {
        control.query::<()>(redis::cmd("SELECT").arg(0))?;
    }
    counted?;
    Ok(counts)
}
