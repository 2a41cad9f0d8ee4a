//! Progress of the load under way, read from the client pod's progress endpoint
//! ([`crate::client::pod_io::progress_endpoint`]): the operator never connects to an engine, so it needs
//! neither an engine's password nor a network path to it, and no connection of its own can
//! land in a memory figure. At most one reading per benchmark every few seconds, each bounded
//! in time and bytes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::client::pod_io::progress_endpoint::fetch;

use crate::controller::decide::observation::{LoadProbe, ProbeTarget};

/// Readings are reused for this long, so watch events in between do not ask again (and a
/// status written with a new reading does not trigger a new reading).
const REUSE_FOR: Duration = Duration::from_secs(4);

/// A reading of a client that is finishing (its last repetition loaded) is reused for this
/// long only: the operator looks every second then, to take the result when it is done.
const REUSE_FINISHING_FOR: Duration = Duration::from_secs(1);

/// How long a reading may take.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// A benchmark, by namespace and name, and the client read (a reading of one client pod is
/// never reused for the next).
type BenchmarkKey = (String, String, std::net::SocketAddr);

/// The last reading of each benchmark.
#[derive(Default)]
pub struct ProgressReadings {
    last: Mutex<HashMap<BenchmarkKey, (Instant, Option<LoadProbe>)>>,
}

impl ProgressReadings {
    /// A reading of the client at `target`, fresh or at most a few seconds old.
    pub async fn read(
        &self,
        namespace: &str,
        name: &str,
        target: ProbeTarget,
    ) -> Option<LoadProbe> {
        let key = (namespace.to_string(), name.to_string(), target.address);
        if let Some((at, reading)) = self.last.lock().expect("readings lock").get(&key) {
            let reuse_for = match reading {
                // A client waiting on a mark is answered within a second or so.
                Some(r) if r.finishing || r.mark.is_some() => REUSE_FINISHING_FOR,
                _ => REUSE_FOR,
            };
            if at.elapsed() < reuse_for {
                return *reading;
            }
        }
        let reading = fetch(target.address, READ_TIMEOUT)
            .await
            .map(|reading| LoadProbe {
                repetitions_begun: Some(reading.repetition),
                loaded_percent: reading.loaded_percent(),
                done: reading.done,
                finishing: reading.finishing(),
                mark: reading.mark,
            });
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
            .retain(|(ns, n, _), _| (ns.as_str(), n.as_str()) != (namespace, name));
    }
}
