package nemesis_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/stretchr/testify/require"
	etcdwal "go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/faults/nemesis"
)

// The locator's tests write log files with the real libraries, in small
// batches of entries of assorted sizes as a node appends them, flip the
// bytes DamageSpot picks in a copy and read the copy back with the same
// library: the entry DamageSpot named (at or below the durable index) must
// come back changed or not at all, or the library must refuse the log,
// which is what a node refuses to start on. On the write-ahead logs a flip
// at a fixed distance from the end of the records (fixedOffset, the rule
// DamageLog used before) leaves every entry intact on some of the same
// files: the tests check that too, so that they keep files on which a
// rule blind to the format fails.

// How many files the write-ahead log tests write: enough that a flip at
// a fixed offset lands on bytes no entry holds in some of them (raft-wal's
// padding and commit frames hold about a twentieth of its bytes, etcd's
// record padding of 4 bytes or more about a fiftieth).
const (
	raftWALFiles = 64
	etcdWALFiles = 128
)

// segmentSize is the size of the tests' segment files (preallocated):
// room for every file's entries.
const segmentSize = 64 << 10

// logFormat is one store's format under test: write fills a new log in
// dir with 30-49 entries in small batches and returns them (index →
// the entry in a canonical encoding); read reads a log back the way the
// store opens it, failing where it refuses to.
type logFormat struct {
	format nemesis.LogFormat
	glob   string // the log file under dir
	write  func(t *testing.T, dir string, rng *rand.Rand) map[uint64][]byte
	read   func(t *testing.T, dir string) (map[uint64][]byte, error)
}

// readBack is what reading a damaged copy of a log gave.
type readBack struct {
	got map[uint64][]byte
	err error
}

// changed reports whether the entry at index is missing or differs from
// want's, or the log was refused.
func (r readBack) changed(want map[uint64][]byte, index uint64) bool {
	return r.err != nil || !bytes.Equal(r.got[index], want[index])
}

// intact reports whether every entry of want up to durable came back as it was.
func (r readBack) intact(want map[uint64][]byte, durable uint64) bool {
	if r.err != nil {
		return false
	}
	for i, w := range want {
		if i <= durable && !bytes.Equal(r.got[i], w) {
			return false
		}
	}
	return true
}

// testDamageSpot writes files of lf with seeds 0..files-1 and checks
// DamageSpot's flip on each; it returns on how many of them a flip at
// fixedOffset left every durable entry intact.
func testDamageSpot(t *testing.T, lf logFormat, files int) (fixedIntact int) {
	for seed := range int64(files) {
		rng := rand.New(rand.NewSource(seed))
		dir := filepath.Join(t.TempDir(), "log")
		want := lf.write(t, dir, rng)
		paths, err := filepath.Glob(filepath.Join(dir, lf.glob))
		require.NoError(t, err)
		require.Len(t, paths, 1, "log files %s", lf.glob)
		name, err := filepath.Rel(dir, paths[0])
		require.NoError(t, err)
		orig, err := os.ReadFile(paths[0])
		require.NoError(t, err)
		durable := uint64(len(want)) - uint64(rng.Intn(3)) // the watermark may trail the log

		off, e, err := nemesis.DamageSpot(lf.format, orig, durable)
		require.NoError(t, err, "file %d", seed)
		require.LessOrEqual(t, e.Index, durable)
		require.True(t, e.Off <= off && off+nemesis.DamageBytes <= e.Off+e.Len, "file %d: offset %d outside entry %d's payload %d+%d", seed, off, e.Index, e.Off, e.Len)
		r := damagedCopy(t, lf, dir, name, flipAt(orig, off))
		require.True(t, r.changed(want, e.Index),
			"file %d: flipping offset %d left entry %d (payload %d+%d, durable %d) intact", seed, off, e.Index, e.Off, e.Len, durable)

		if damagedCopy(t, lf, dir, name, flipAt(orig, fixedOffset(orig))).intact(want, durable) {
			fixedIntact++
		}
	}
	return fixedIntact
}

// fixedOffset is the former rule: 4 bytes at min(1.5 KiB, half the
// records) before the end of the records (the last non-zero byte).
func fixedOffset(b []byte) int {
	end := len(bytes.TrimRight(b, "\x00"))
	return end - min(1500, end/2)
}

// flipAt returns a copy of b with nemesis.DamageBytes bytes flipped at off.
func flipAt(b []byte, off int) []byte {
	out := bytes.Clone(b)
	for i := off; i < off+nemesis.DamageBytes; i++ {
		out[i] ^= 0xA5
	}
	return out
}

// damagedCopy copies the log in dir (a crash image: a library may hold it
// open), replaces its file name with b, and reads the copy back. (Reading
// may rewrite it: a repair, a replayed memtable.)
func damagedCopy(t *testing.T, lf logFormat, dir, name string, b []byte) readBack {
	t.Helper()
	work := filepath.Join(t.TempDir(), "log")
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(work, rel), 0o700)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if rel == name {
			data = b
		}
		return writeSparse(filepath.Join(work, rel), data)
	}))
	got, err := lf.read(t, work)
	return readBack{got: got, err: err}
}

// writeSparse writes b to a new file at path, leaving 4 KiB blocks of
// zeros as holes (the segments' preallocated space).
func writeSparse(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(int64(len(b)))
	for off := 0; off < len(b) && err == nil; off += 4096 {
		block := b[off:min(off+4096, len(b))]
		if len(bytes.TrimLeft(block, "\x00")) > 0 {
			_, err = f.WriteAt(block, int64(off))
		}
	}
	return errors.Join(err, f.Close())
}

// payload returns n bytes of a command-like payload: printable, as keys
// and owners are, with a few binary bytes as the encoding's integers.
func payload(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		if rng.Intn(8) == 0 {
			b[i] = byte(rng.Intn(256))
		} else {
			b[i] = byte('a' + rng.Intn(26))
		}
	}
	return b
}

// batches calls save with batches of 1 to maxBatch new entries, numbered
// from 1, until 30-49 entries are saved; each entry is a payload of 8 to
// maxData-1 bytes.
func batches(rng *rand.Rand, maxBatch, maxData int, save func(first uint64, payloads [][]byte)) {
	for n, saved := 30+rng.Intn(20), 0; saved < n; {
		ps := make([][]byte, 1+rng.Intn(maxBatch))
		for i := range ps {
			ps[i] = payload(rng, 8+rng.Intn(maxData-8))
		}
		save(uint64(saved+1), ps)
		saved += len(ps)
	}
}

// TestDamageSpotRaftWAL: on raft-wal segments DamageSpot's flip always
// changes or drops its entry, and a flip at the fixed offset does not
// always.
func TestDamageSpotRaftWAL(t *testing.T) {
	t.Parallel()
	intact := testDamageSpot(t, raftWALFormat, raftWALFiles)
	t.Logf("a flip at the fixed offset left every durable entry of %d of %d segments intact", intact, raftWALFiles)
	require.NotZero(t, intact, "no file on which the fixed offset misses every entry: the files no longer test the locator")
}

var raftWALFormat = logFormat{format: nemesis.RaftWALSegment, glob: "*.wal",
	write: func(t *testing.T, dir string, rng *rand.Rand) map[uint64][]byte {
		require.NoError(t, os.MkdirAll(dir, 0o700))
		w, err := raftwal.Open(dir, raftwal.WithSegmentSize(segmentSize), raftwal.WithLogger(hclog.NewNullLogger()))
		require.NoError(t, err)
		want := map[uint64][]byte{}
		at := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
		batches(rng, 3, 128, func(first uint64, ps [][]byte) {
			logs := make([]*raft.Log, len(ps))
			for i, p := range ps {
				logs[i] = &raft.Log{Index: first + uint64(i), Term: 2, Type: raft.LogCommand, Data: p, AppendedAt: at}
				want[logs[i].Index] = raftWALEncode(t, logs[i])
			}
			require.NoError(t, w.StoreLogs(logs))
		})
		require.NoError(t, w.Close())
		return want
	},
	read: func(t *testing.T, dir string) (map[uint64][]byte, error) {
		w, err := raftwal.Open(dir, raftwal.WithSegmentSize(segmentSize), raftwal.WithLogger(hclog.NewNullLogger()))
		if err != nil {
			return nil, err
		}
		defer func() { require.NoError(t, w.Close()) }()
		first, err := w.FirstIndex()
		if err != nil {
			return nil, err
		}
		last, err := w.LastIndex()
		if err != nil {
			return nil, err
		}
		got := map[uint64][]byte{}
		for i := first; first > 0 && i <= last; i++ {
			var l raft.Log
			if err := w.GetLog(i, &l); err != nil {
				return nil, err
			}
			got[i] = raftWALEncode(t, &l)
		}
		return got, nil
	},
}

// raftWALEncode returns l in raft-wal's own encoding (every field).
func raftWALEncode(t *testing.T, l *raft.Log) []byte {
	var b bytes.Buffer
	require.NoError(t, (&raftwal.BinaryCodec{}).Encode(l, &b))
	return b.Bytes()
}

// TestDamageSpotEtcdWAL: on etcd WAL segments DamageSpot's flip always
// changes or drops its entry, or the WAL is refused, and a flip at the
// fixed offset does not always.
func TestDamageSpotEtcdWAL(t *testing.T) {
	old := etcdwal.SegmentSizeBytes
	etcdwal.SegmentSizeBytes = segmentSize
	t.Cleanup(func() { etcdwal.SegmentSizeBytes = old })
	intact := testDamageSpot(t, etcdWALFormat, etcdWALFiles)
	t.Logf("a flip at the fixed offset left every durable entry of %d of %d segments intact", intact, etcdWALFiles)
	require.NotZero(t, intact, "no file on which the fixed offset misses every entry: the files no longer test the locator")
}

var etcdWALFormat = logFormat{format: nemesis.EtcdWALSegment, glob: "*.wal",
	write: func(t *testing.T, dir string, rng *rand.Rand) map[uint64][]byte {
		w, err := etcdwal.Create(zap.NewNop(), dir, []byte("metadata"))
		require.NoError(t, err)
		want := map[uint64][]byte{}
		batches(rng, 8, 64, func(first uint64, ps [][]byte) {
			ents := make([]*raftpb.Entry, len(ps))
			for i, p := range ps {
				ents[i] = &raftpb.Entry{Term: new(uint64(2)), Index: new(first + uint64(i)), Type: raftpb.EntryType_EntryNormal.Enum(), Data: p}
				want[ents[i].GetIndex()] = etcdEncode(t, ents[i])
			}
			last := ents[len(ents)-1].GetIndex()
			require.NoError(t, w.Save(&raftpb.HardState{Term: new(uint64(2)), Vote: new(uint64(1)), Commit: new(last)}, ents))
		})
		require.NoError(t, w.Close())
		return want
	},
	// read opens the WAL as the etcd backend's store does: a record taken
	// for a torn write is cut off once (wal.Repair), any other error
	// refuses the WAL.
	read: func(t *testing.T, dir string) (map[uint64][]byte, error) {
		for repaired := false; ; repaired = true {
			w, err := etcdwal.Open(zap.NewNop(), dir, &walpb.Snapshot{Index: new(uint64(0)), Term: new(uint64(0))})
			if err != nil {
				return nil, err
			}
			_, _, ents, err := w.ReadAll()
			require.NoError(t, w.Close())
			if err == nil {
				got := map[uint64][]byte{}
				for _, e := range ents {
					got[e.GetIndex()] = etcdEncode(t, e)
				}
				return got, nil
			}
			if repaired || !errors.Is(err, io.ErrUnexpectedEOF) || !etcdwal.Repair(zap.NewNop(), dir) {
				return nil, err
			}
		}
	},
}

// etcdEncode returns e's protobuf encoding (every field).
func etcdEncode(t *testing.T, e *raftpb.Entry) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(e)
	require.NoError(t, err)
	return b
}

// TestDamageSpotBadger: on badger memtable logs (written through
// transactions, as the badger store appends, read while the database is
// open, as a killed node leaves them) DamageSpot's flip always drops or
// changes its entry.
func TestDamageSpotBadger(t *testing.T) {
	t.Parallel()
	testDamageSpot(t, badgerFormat, 16)
}

// badgerKey is the hashicorp backend's badger key of a Raft entry.
func badgerKey(index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte("hlog/"), index)
}

// badgerOptions are the badger store's (backends.BadgerOptions) with
// small files, as several databases are open at once.
func badgerOptions(dir string) badger.Options {
	return backends.BadgerOptions(dir).WithMemTableSize(1 << 20).WithValueLogFileSize(1 << 20).WithValueThreshold(1 << 10)
}

var badgerFormat = logFormat{format: nemesis.BadgerMemtableLog, glob: "*.mem",
	// write leaves the database open (closed at the test's end), so that
	// its memtable log still holds the entries.
	write: func(t *testing.T, dir string, rng *rand.Rand) map[uint64][]byte {
		db, err := badger.Open(badgerOptions(dir))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, db.Close()) })
		want := map[uint64][]byte{}
		batches(rng, 3, 128, func(first uint64, ps [][]byte) {
			require.NoError(t, db.Update(func(txn *badger.Txn) error {
				for i, p := range ps {
					want[first+uint64(i)] = p
					if err := txn.Set(badgerKey(first+uint64(i)), p); err != nil {
						return err
					}
				}
				return nil
			}))
		})
		return want
	},
	read: func(t *testing.T, dir string) (map[uint64][]byte, error) {
		db, err := badger.Open(badgerOptions(dir))
		if err != nil {
			return nil, err
		}
		defer func() { require.NoError(t, db.Close()) }()
		got := map[uint64][]byte{}
		err = db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("hlog/")})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				v, err := it.Item().ValueCopy(nil)
				if err != nil {
					return err
				}
				got[binary.BigEndian.Uint64(it.Item().Key()[len("hlog/"):])] = v
			}
			return nil
		})
		return got, err
	},
}
