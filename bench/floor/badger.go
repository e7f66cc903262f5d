package floor

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/dgraph-io/badger/v4"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/bench/latency"
)

// Badger times single-entry write transactions of cfg.Bytes-byte values to a
// new badger database in a temporary directory under dir, with SyncWrites on:
// the cost of one durable append through the storage engine both backends log
// to, next to Fsync's cost of the bare disk (STYLE.md: "our benchmark should
// show honestly what badger costs"). The options are the backends' own
// (backends.BadgerOptions: SyncWrites, no conflict detection, no compression,
// no caches, 16 MiB memtables, 64 MiB value log files). The database is removed
// afterwards. Errors: badger's, ErrNoSamples, ctx.Err().
func Badger(ctx context.Context, dir string, cfg Config) (latency.Summary, error) {
	cfg = cfg.withDefaults(DefaultRecordBytes)
	tmp, err := os.MkdirTemp(dir, "ticketbench-badger-*")
	if err != nil {
		return latency.Summary{}, fmt.Errorf("floor: badger dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	db, err := badger.Open(backends.BadgerOptions(tmp))
	if err != nil {
		return latency.Summary{}, fmt.Errorf("floor: badger open: %w", err)
	}
	defer db.Close()

	val := make([]byte, cfg.Bytes)
	key := make([]byte, 8)
	return measure(ctx, cfg, func(i int) error {
		binary.BigEndian.PutUint64(key, uint64(i))
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set(key, val) }); err != nil {
			return fmt.Errorf("floor: badger write: %w", err)
		}
		return nil
	})
}
