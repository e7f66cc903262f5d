package etcd_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/backends/etcd"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/core"
)

// entryPrefix is raftstore's key prefix of log entries (see its doc.go).
var entryPrefix = []byte("etcd/entry/")

// writeSome opens a single node in a fresh data dir with the badger log
// store (the tests here damage badger's records and files; the write-ahead
// log store's damage is backendtest's and walstore's), grants n keys and
// closes it cleanly; it returns the data dir, the address, and the applied
// index. Reopening the dir with an unset Config.LogStore keeps badger
// (backends.ResolveLogStore).
func writeSome(t *testing.T, n int) (string, string, uint64) {
	t.Helper()
	ctx := testCtx(t)
	dir, addr := t.TempDir(), backendtest.FreeAddr(t)
	s := openSingle(t, dir, addr, func(c *backends.Config) { c.LogStore = backends.LogStoreBadger })
	for i := 0; i < n; i++ {
		_, err := s.n.Propose(ctx, core.Grant(fmt.Sprintf("k%d", i), 1000, "o"))
		require.NoError(t, err)
	}
	applied := s.sm.AppliedIndex()
	require.NoError(t, s.n.Close())
	return dir, addr, applied
}

// damage opens the badger database of dir directly and applies f to it.
func damage(t *testing.T, dir string, f func(txn *badger.Txn) error) {
	t.Helper()
	db, err := badgerlog.Open(dir, "etcd", nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(f))
	require.NoError(t, db.Close())
}

// rewriteValue replaces the value of key with f(value).
func rewriteValue(txn *badger.Txn, key []byte, f func([]byte) []byte) error {
	item, err := txn.Get(key)
	if err != nil {
		return err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return err
	}
	return txn.Set(key, f(v))
}

func entryKey(i uint64) []byte { return badgerlog.IndexKey(entryPrefix, i) }

// TestCorruptDataDirIsRefused: bad or truncated raft data on disk makes New
// fail with ErrCorrupt, every time (nothing is rewritten), without panicking.
func TestCorruptDataDirIsRefused(t *testing.T) {
	tests := []struct {
		name   string
		damage func(last uint64) func(txn *badger.Txn) error
	}{
		{"cut_last_entry", func(last uint64) func(txn *badger.Txn) error {
			return func(txn *badger.Txn) error {
				return rewriteValue(txn, entryKey(last), func(v []byte) []byte { return v[:len(v)-3] })
			}
		}},
		{"flip_a_byte", func(last uint64) func(txn *badger.Txn) error {
			return func(txn *badger.Txn) error {
				return rewriteValue(txn, entryKey(last-2), func(v []byte) []byte { v[len(v)/2] ^= 0x10; return v })
			}
		}},
		{"lose_a_committed_entry", func(last uint64) func(txn *badger.Txn) error {
			return func(txn *badger.Txn) error { return txn.Delete(entryKey(last)) }
		}},
		{"flip_a_byte_in_the_hard_state", func(uint64) func(txn *badger.Txn) error {
			return func(txn *badger.Txn) error {
				return rewriteValue(txn, []byte("etcd/hardstate"), func(v []byte) []byte { v[len(v)-1] ^= 0x01; return v })
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, addr, applied := writeSome(t, 8)
			damage(t, dir, tt.damage(applied))
			for attempt := 0; attempt < 2; attempt++ {
				s := &single{sm: core.NewStateMachine()}
				n, err := etcd.New(singleConfig(dir, addr, s))
				if n != nil {
					_ = n.Close()
				}
				require.ErrorIs(t, err, etcd.ErrCorrupt, "attempt %d", attempt)
				t.Logf("attempt %d: %v", attempt, err)
			}
		})
	}
}

// TestBadgerFileDamageIsRefused damages badger's own files of a cleanly
// closed node (its tables hold the log by then): New must fail with an error,
// not panic and not start on a silently shortened log.
func TestBadgerFileDamageIsRefused(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"cut_table_file", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, fi.Size()-10))
		}},
		{"flip_bytes_in_table_file", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			for i := 64; i < len(b)/2; i += 97 {
				b[i] ^= 0x5a
			}
			require.NoError(t, os.WriteFile(path, b, 0o600))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, addr, _ := writeSome(t, 8)
			tables, err := filepath.Glob(filepath.Join(badgerlog.DBDir(dir), "*.sst"))
			require.NoError(t, err)
			require.NotEmpty(t, tables, "a clean close flushes the log to tables")
			for _, p := range tables {
				tt.damage(t, p)
			}
			s := &single{sm: core.NewStateMachine()}
			n, err := etcd.New(singleConfig(dir, addr, s))
			if n != nil {
				_ = n.Close()
			}
			require.Error(t, err)
			t.Log(err)
		})
	}
}

// TestWrongBackendDataDirIsRefused: a data dir claimed by the hashicorp
// backend is not opened by this one.
func TestWrongBackendDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	db, err := badgerlog.Open(dir, "hashicorp", nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	s := &single{sm: core.NewStateMachine()}
	_, err = etcd.New(singleConfig(dir, backendtest.FreeAddr(t), s))
	require.ErrorIs(t, err, badgerlog.ErrWrongBackend)
}

// TestUndecodableEntryStopsTheNode: a committed entry that verifies on disk
// but carries an unknown envelope stops the node (core.ErrDecode) instead of
// being skipped, which would fork the state.
func TestUndecodableEntryStopsTheNode(t *testing.T) {
	dir, addr, applied := writeSome(t, 5)
	damage(t, dir, func(txn *badger.Txn) error {
		return rewriteValue(txn, entryKey(applied), func(v []byte) []byte {
			e := &pb.Entry{}
			if err := proto.Unmarshal(v[4:], e); err != nil {
				panic(err)
			}
			e.Data = append([]byte{0x7f}, e.GetData()[1:]...) // unknown envelope version
			body, err := proto.Marshal(e)
			if err != nil {
				panic(err)
			}
			rec := binary.BigEndian.AppendUint32(nil, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
			return append(rec, body...)
		})
	})
	s := &single{sm: core.NewStateMachine()}
	cfg := singleConfig(dir, addr, s)
	fatal := make(chan error, 2)
	cfg.OnFatal = func(err error) { fatal <- err }
	n, err := etcd.New(cfg)
	require.NoError(t, err, "the record itself verifies")
	ctx := testCtx(t)
	require.Eventually(t, func() bool {
		_, err := n.Propose(ctx, core.Grant("x", 1000, "o"))
		return errors.Is(err, core.ErrStopped)
	}, backendtest.WaitTimeout, 5*time.Millisecond)
	require.Less(t, s.sm.AppliedIndex(), applied, "the bad entry was not applied")
	require.ErrorIs(t, <-fatal, core.ErrDecode, "OnFatal is told why")
	require.ErrorIs(t, n.Close(), core.ErrDecode)
	require.Empty(t, fatal, "OnFatal is called once")
}
