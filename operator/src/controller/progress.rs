//! Progress of the engine under load, read by the operator itself so that the client needs no
//! API access: `INFO commandstats` counts the client's `FLUSHALL`s (one at the start of each
//! repetition), and `ZCARD`/`DBSIZE` the items loaded so far. One short connection per reading,
//! at most one reading per benchmark every few seconds; the client waits until it is the
//! engine's only client before reading memory, so a reading never lands in a figure.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::IntoConnectionInfo;

use super::plan::{LoadProbe, ProbeTarget};

/// Readings are reused for this long, so watch events in between do not hit the engine (and a
/// status written with a new reading does not trigger a new reading).
const REUSE_FOR: Duration = Duration::from_secs(4);

/// The last reading of each benchmark.
#[derive(Default)]
pub struct ProgressReadings {
    last: Mutex<HashMap<(String, String), (Instant, Option<LoadProbe>)>>,
}

impl ProgressReadings {
    /// A reading of the engine at `target`, fresh or at most a few seconds old.
    pub async fn read(
        &self,
        namespace: &str,
        name: &str,
        target: ProbeTarget,
    ) -> Option<LoadProbe> {
        let key = (namespace.to_string(), name.to_string());
        if let Some((at, reading)) = self.last.lock().expect("readings lock").get(&key)
            && at.elapsed() < REUSE_FOR
        {
            return *reading;
        }
        let reading = tokio::time::timeout(
            Duration::from_secs(3),
            tokio::task::spawn_blocking(move || read_engine(&target)),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .flatten();
        self.last
            .lock()
            .expect("readings lock")
            .insert(key, (Instant::now(), reading));
        reading
    }

    /// Forgets a benchmark's reading (once it is deleted).
    pub fn forget(&self, namespace: &str, name: &str) {
        self.last
            .lock()
            .expect("readings lock")
            .remove(&(namespace.to_string(), name.to_string()));
    }
}

fn read_engine(target: &ProbeTarget) -> Option<LoadProbe> {
    let address: std::net::SocketAddr = target.address.parse().ok()?;
    let info = redis::ConnectionAddr::Tcp(address.ip().to_string(), address.port())
        .into_connection_info()
        .ok()?;
    let client = redis::Client::open(info).ok()?;
    let mut connection = client
        .get_connection_with_timeout(Duration::from_secs(1))
        .ok()?;
    connection
        .set_read_timeout(Some(Duration::from_secs(2)))
        .ok()?;
    let commandstats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut connection)
        .ok()?;
    let items: Option<u64> = match &target.sorted_set_key {
        Some(key) => redis::cmd("ZCARD").arg(key).query(&mut connection).ok(),
        None => redis::cmd("DBSIZE").query(&mut connection).ok(),
    };
    Some(LoadProbe {
        repetitions_begun: flushall_calls(&commandstats),
        items,
    })
}

/// `calls` of `cmdstat_flushall` in `INFO commandstats`.
pub fn flushall_calls(commandstats: &str) -> Option<u32> {
    let line = commandstats
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("cmdstat_flushall:"))?;
    line.split_once(':')?
        .1
        .split(',')
        .find_map(|field| field.strip_prefix("calls="))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetitions_begun_are_the_flushall_calls() {
        let info = "# Commandstats\r\ncmdstat_zadd:calls=20000,usec=1,usec_per_call=0.1,rejected_calls=0,failed_calls=0\r\ncmdstat_flushall:calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(flushall_calls(info), Some(3));
        assert_eq!(flushall_calls("# Commandstats\r\n"), None);
    }
}
