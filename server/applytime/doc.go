// Package applytime keeps, in a node's data dir, when the node applied each
// log index, on a clock that keeps running while the process restarts: the
// host's monotonic clock, valid until the host reboots. A restarted node
// replays its log; without this record it would measure every replayed lease
// from the replay, later than the client's start by however long ago the
// lease's last Grant or Renew applied (docs/design.md#leases). With it, the
// lessor measures a replayed lease from the moment an earlier run of this
// node had already applied that entry, which is after the client sent it
// (so never early) and at most one bucket (10 ms) after this node first
// applied it (so the bound survives restarts).
//
// The record is a ring of fixed slots, one per 10 ms bucket of the host's
// monotonic clock, memory-mapped: each apply stores the bucket and the
// applied index with two 8-byte atomic stores, no system call, so a kill -9
// loses nothing the process applied (the page cache keeps the mapping's
// writes). It is never synced: a power cut or reboot loses it, and a record
// of another boot (the host's boot id) is void anyway, since the monotonic
// clock restarts with the host. A record found in a data dir without Raft
// state (a fresh bootstrap, an empty dir joining, a restore) is discarded:
// its indexes named another log.
//
// The file is 16 bytes per 10 ms bucket of Config.Span (lease.max_ms) plus
// a 128-byte header: 960 KB at the default 600 s, 5.8 MB at 1 h, 138 MB at
// 24 h. Open allocates every block of it before mapping it (fallocate(2),
// or writing it where the file system has none): a store into a mapped
// page with no block behind it allocates inside the page fault, and on a
// full disk that is a SIGBUS, not an error. So a full disk fails Open with
// ENOSPC, naming the file, and the node stops with its disk-full fail-stop
// (docs/design.md#storage-and-recovery); once Open returned, the mapping's
// loads and stores allocate nothing. A store can still fault where no
// allocation prevents it (the file truncated underneath by another
// process; a copy-on-write file system such as btrfs, which needs a new
// block for every rewrite, on a full disk; a disk error): Applied recovers
// from that fault, stops recording and reports it (Config.OnFault), since
// the node goes on safely without the record.
//
// What a slot says: "by the end of bucket b, this node had applied index j".
// A slot is written bucket first, then index, so a process killed between
// the two stores leaves either the old index under the new bucket (true: it
// applied it earlier) or the new pair. For index i, the earliest slot whose
// index (or an earlier slot's) is at least i gives the time; an index older
// than the ring (which spans the longest lease) gets the oldest slot's time,
// by which its lease has run out.
//
// # Usage
//
//	rec, err := applytime.Open(applytime.Config{Path: filepath.Join(dataDir, applytime.FileName),
//		Span: maxLease, Host: applytime.HostClock(), Now: time.Now, Keep: dirHasRaftState})
//	// on every apply: rec.Applied(index)
//	// in the lessor: if t, ok := rec.At(index); ok && t.Before(now) { start = t }
//	defer rec.Close()
//
// Open fails with ErrUnsupported where the host has no boot id or mmap
// (anything but Linux): the node then measures replayed leases from the
// replay, as without the record. It fails with an error wrapping
// syscall.ENOSPC (or EDQUOT) when the data dir's file system has no room
// for the whole file: the node must then stop, as on any full disk.
package applytime
