package backends

// SnapshotLogPercent is the expansion factor of SnapshotDue, in percent: a
// new snapshot is taken once the log written since the last one is at
// least this share of the last snapshot's size. The Raft thesis (§5.1.1,
// "When to snapshot") proposes this rule: with factor k, about 1/(1+k) of
// the disk bandwidth goes to snapshots, and the disk holds at most the old
// snapshot, k times its size of log and the new snapshot being written.
// With 0.5, a table of a million locks (a ~70 MB snapshot) is snapshotted
// once per ~35 MB of log rather than every SnapshotThreshold entries: a
// restarted node reads and applies at most half a snapshot's worth of log
// after restoring the snapshot (the log's replay costs more per byte than
// the snapshot's restore, docs/benchmarks.md#scale-a-million-locks), and
// the data dir stays within about two and a half snapshots' size plus the
// TrailingLogs entries kept after compaction
// (docs/design.md#storage-and-recovery), for two thirds of the disk
// bandwidth spent on snapshots where a factor of 1 spent half.
const SnapshotLogPercent = 50

// SnapshotDue reports whether a node should take a snapshot: at least
// threshold (Config.SnapshotThreshold) entries and at least
// SnapshotLogPercent % of snapshotBytes bytes of entry data were applied since
// the latest snapshot, whose encoding is snapshotBytes long (0 when there
// is none). A small table is thus snapshotted every threshold entries, as
// before, and a big one only once the log has grown to half its size, so the
// cost of snapshotting stays proportional to the writes, not to the table
// times the writes.
func SnapshotDue(entries, logBytes, snapshotBytes, threshold uint64) bool {
	return entries >= threshold && logBytes*100 >= SnapshotLogPercent*snapshotBytes
}
