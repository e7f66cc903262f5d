package floor

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/ticketd/ticketd/bench/latency"
)

// Badger times single-entry write transactions of cfg.Bytes-byte values to a
// new badger database in a temporary directory under dir, with SyncWrites on:
// the cost of one durable append through the storage engine both backends log
// to, next to Fsync's cost of the bare disk (STYLE.md: "our benchmark should
// show honestly what badger costs"). The options mirror the backends'
// (backends/internal/badgerlog.Options, which is internal and cannot be
// imported here): SyncWrites, no conflict detection, no compression, no
// caches, 16 MiB memtables, 64 MiB value log files. The database is removed
// afterwards. Errors: badger's, ErrNoSamples, ctx.Err().
func Badger(ctx context.Context, dir string, cfg Config) (latency.Summary, error) {
	cfg = cfg.withDefaults(DefaultRecordBytes)
	tmp, err := os.MkdirTemp(dir, "ticketbench-badger-*")
	if err != nil {
		return latency.Summary{}, fmt.Errorf("floor: badger dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	opts := badger.DefaultOptions(tmp).
		WithSyncWrites(true).
		WithDetectConflicts(false).
		WithNumVersionsToKeep(1).
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithIndexCacheSize(0).
		WithMemTableSize(16 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2).
		WithMetricsEnabled(false).
		WithLogger(nil)
	db, err := badger.Open(opts)
	if err != nil {
		return latency.Summary{}, fmt.Errorf("floor: badger open: %w", err)
	}
	defer db.Close()

	val := make([]byte, cfg.Bytes)
	key := make([]byte, 8)
	h := latency.New()
	deadline := time.Now().Add(cfg.Budget)
	for i := 0; i < cfg.Samples && time.Now().Before(deadline); i++ {
		if err := ctx.Err(); err != nil {
			return latency.Summary{}, err
		}
		binary.BigEndian.PutUint64(key, uint64(i))
		t0 := time.Now()
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set(key, val) }); err != nil {
			return latency.Summary{}, fmt.Errorf("floor: badger write: %w", err)
		}
		h.Record(time.Since(t0))
	}
	return summary(h)
}
