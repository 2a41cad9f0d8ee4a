//! Which phase a repetition was in: the word a result names a failed phase by
//! (`error.phase.name`), and the controller reads back.

crate::words::open_words! {
    /// A phase a repetition runs after its readings, serialized as its lowercase name (the
    /// words earlier releases wrote in a result's `error.phase.name`); a name this release
    /// does not know (a newer client's) reads as [`PhaseKind::Unknown`], keeping the name.
    pub enum PhaseKind {
        Snapshot = "snapshot",
        Replica = "replica",
        Churn = "churn",
        Defrag = "defrag",
        Eviction = "eviction",
    }
    unknown_meaning = "A phase this release does not know, run by a newer client.\n";
}
