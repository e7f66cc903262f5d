// Package watermark keeps a node's durable record of how far its Raft log
// reached, in a small file of its own beside the badger database, so that a
// log that storage silently shortened is noticed at start instead of being
// served (docs/design.md#storage-and-recovery).
//
// badger/v4 replays its memtable write-ahead log (the *.mem files) at open
// and stops at the first record whose checksum does not match: it truncates
// the file there and drops every record after it, valid or not, without an
// error (memtable.go, logFile.iterate and UpdateSkipList in v4.9.6). A Raft
// node that loses acknowledged entries that way and rejoins would let a new
// leader overwrite them on the other nodes (Raft assumes stable storage keeps
// what it acknowledged; etcd's WAL refuses damage that valid records follow).
// The watermark is independent of badger's files, so damage to them cannot
// lower it.
//
// A Mark holds two indexes:
//
//   - LastIndex, the highest log index durably appended. It is raised after
//     each append is durable, and lowered, durably, before a legitimate
//     truncation of the log's suffix (a follower dropping conflicting
//     entries), so a crash at any point leaves it at or below the log's end.
//     The raise is written in the background (Advance): the watermark's own
//     synced write overlaps the next append instead of adding to each
//     append's latency, at the price of trailing the log by the
//     appends made during one watermark write; damage confined to those last
//     entries goes unnoticed, anything deeper is still refused.
//   - Applied, the highest index the node had applied (so committed) when the
//     mark was written: the lower bound of the state it served, which a
//     restarted node must reach again before it serves stale reads
//     (core.Status.RecoveredCommitIndex).
//
// Every Store is one 20-byte write at offset 0 of an already allocated file,
// opened with O_DSYNC (one data sync, no metadata journal commit, and no
// allocation: it cannot fail for lack of space).
//
// The check depends on the mark surviving, so Open also refuses stores that
// hold Raft state beside a watermark file that is missing, empty or
// unreadable (*MissingError), unless Options.AcceptMissing (ticketd's
// --accept-missing-watermark) says to write a fresh mark at the log's end,
// which it logs at warn level. It refuses too stores that Raft cannot have
// written as they are, whatever the mark (*HoleError): entries missing
// between the newest snapshot and the log, or a stored term below the last
// entry's. Every Raft log store is checked the same way through Log, which
// each backend implements once over its library's storage interfaces.
//
// # Usage
//
//  1. Open(dataDir, log, opts) when the node starts, before Raft and before
//     anything writes Raft state (bootstrap): it returns the Mark of the
//     previous run (zero for a new data dir), or refuses a log that ends
//     before mark.LastIndex (*GapError), a log without a usable mark
//     (*MissingError) or a log with a hole (*HoleError); each error names
//     what is missing and the way to recover.
//  2. After each durable append, Advance(last, applied) (it does not wait for
//     the disk); before deleting a suffix, Update the mark with LastIndex
//     lowered to what remains (synchronous, and it absorbs a pending
//     Advance, so a later background write cannot undo it).
//  3. Close when the node stops.
//
// Example:
//
//	wm, mark, err := watermark.Open(cfg.DataDir, stores, watermark.Options{
//		AcceptMissing: cfg.AcceptMissingWatermark, Logger: logger})
//	if err != nil {
//		return err // damaged log or missing mark: replace the member
//	}
//	// after each synced append of entries up to last:
//	err = wm.Advance(last, applied)
package watermark
