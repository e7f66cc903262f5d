package backends

// SnapshotLogRatio is the expansion factor of SnapshotDue: a new snapshot
// is taken once the log written since the last one is at least this many
// times the last snapshot's size. The Raft thesis (§5.1.1, "When to
// snapshot") proposes this rule: with factor k, about 1/(1+k) of the disk
// bandwidth goes to snapshots, and the disk holds at most the old
// snapshot, k times its size of log and the new snapshot being written.
// With 1, a table of a million locks (a ~37 MB snapshot) is snapshotted
// once per ~37 MB of log rather than every SnapshotThreshold entries, and
// the data dir stays within about three snapshots' size plus the
// TrailingLogs entries kept after compaction (docs/design.md#storage-and-recovery).
const SnapshotLogRatio = 1

// SnapshotDue reports whether a node should take a snapshot: at least
// threshold (Config.SnapshotThreshold) entries and at least
// SnapshotLogRatio × snapshotBytes bytes of entry data were applied since
// the latest snapshot, whose encoding is snapshotBytes long (0 when there
// is none). A small table is thus snapshotted every threshold entries, as
// before, and a big one only once the log has grown as big as it, so the
// cost of snapshotting stays proportional to the writes, not to the table
// times the writes.
func SnapshotDue(entries, logBytes, snapshotBytes, threshold uint64) bool {
	return entries >= threshold && logBytes >= SnapshotLogRatio*snapshotBytes
}
