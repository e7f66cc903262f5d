package badgerlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// Sentinel errors of package badgerlog. Compare with errors.Is.
var (
	// ErrWrongBackend: the data dir was written by another backend (its marker
	// names a different one); opening it would misread its log. It is
	// backends.ErrWrongBackend, which the write-ahead log stores report too.
	ErrWrongBackend = backends.ErrWrongBackend
	// ErrCorrupt: a stored key or value does not have the expected encoding.
	ErrCorrupt = errors.New("badgerlog: corrupt record")
	// ErrDiskFull: the file system of the data dir is full, or too full for
	// badger to write safely (see DiskFull and Batch). Fatal for the node.
	ErrDiskFull = errors.New("badgerlog: disk full")
)

// MarkerKey is the key under which Open records the name of the backend that
// first opened the database. Backends must keep their own keys under other
// prefixes.
var MarkerKey = []byte("meta/backend")

// DBDir returns where the badger database of the node with data dir dataDir lives.
func DBDir(dataDir string) string { return filepath.Join(dataDir, "raft") }

// SnapshotDir returns where the snapshot files of the node with data dir
// dataDir live: hashicorp's FileSnapshotStore, or the etcd backend's badger
// store (one <term>-<index>.snap file beside the database).
func SnapshotDir(dataDir string) string { return filepath.Join(dataDir, "snapshots") }

// Options returns the badger options used for a Raft log in dir:
// backends.BadgerOptions(dir) (SyncWrites on, see there for each setting),
// with badger's own logging sent to logger (Info demoted to Debug: badger is
// chatty).
func Options(dir string, logger *zap.Logger) badger.Options {
	if logger == nil {
		logger = zap.NewNop()
	}
	return backends.BadgerOptions(dir).
		WithLogger(zapLogger{logger.Named("badger").Sugar()})
}

// Open opens (creating it if needed) the badger database of the node whose
// data dir is dataDir, at DBDir(dataDir), with Options. On first open it
// records backend (for example "hashicorp") under MarkerKey; a later Open with
// another backend name fails with an error wrapping ErrWrongBackend and leaves
// the database untouched. On a file system with less than ReserveBytes
// free it fails with an error wrapping ErrDiskFull before badger touches
// the database. The caller closes the returned DB.
func Open(dataDir, backend string, logger *zap.Logger) (*badger.DB, error) {
	if backend == "" {
		return nil, errors.New("badgerlog: open: empty backend name")
	}
	dir := DBDir(dataDir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("badgerlog: open %s: %w", dir, err)
	}
	// badger.Open writes through mmap into sparse files (its LOCK file, a
	// new memtable write-ahead log): on a disk without room for them that
	// is a SIGBUS inside badger, or an error that reads like a damaged log.
	// Refuse first, saying the disk is full (fail-stop,
	// docs/design.md#storage-and-recovery).
	if err := CheckSpace(dir); err != nil {
		return nil, fmt.Errorf("badgerlog: open %s: %w", dir, err)
	}
	db, err := badger.Open(Options(dir, logger))
	if err != nil {
		// A file badger's MANIFEST names is missing or damaged: the log
		// cannot be read whole, so the node must not start on it.
		return nil, fmt.Errorf("badgerlog: open %s: %w; the raft log cannot be read, so this node refuses to start: "+
			"if a file of the data dir was lost or damaged, recover by %s", dir, err, watermark.ReplaceMember)
	}
	if err := claim(db, backend); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("badgerlog: open %s: %w", dataDir, err)
	}
	return db, nil
}

// claim records backend as the owner of db, or checks that it already is.
func claim(db *badger.DB, backend string) error {
	return db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(MarkerKey)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			return txn.Set(MarkerKey, []byte(backend))
		case err != nil:
			return err
		}
		owner, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if string(owner) != backend {
			return fmt.Errorf("%w: data dir was written by the %s backend; refusing to open it with %s",
				ErrWrongBackend, owner, backend)
		}
		return nil
	})
}

// Batch calls put(txn, i) for i in [0, n) and commits durably. All n normally
// go in one transaction (one WAL sync); when badger refuses to grow the
// transaction (badger.ErrTxnTooBig), the part so far is committed and put(i)
// is retried in a fresh transaction. Every part is committed (and, with
// SyncWrites, synced) before Batch returns nil; on error, a prefix of the
// items may have been committed. put must only Set or Delete on txn.
//
// Before writing, Batch checks that the database's file system has
// ReserveBytes free (CheckSpace) and fails with an error wrapping ErrDiskFull
// otherwise; write errors for lack of space are wrapped the same way.
func Batch(db *badger.DB, n int, put func(txn *badger.Txn, i int) error) error {
	if err := CheckSpace(db.Opts().Dir); err != nil {
		return err
	}
	return DiskFull(batch(db, n, put))
}

func batch(db *badger.DB, n int, put func(txn *badger.Txn, i int) error) error {
	txn := db.NewTransaction(true)
	defer func() { txn.Discard() }()
	pending := 0
	for i := 0; i < n; i++ {
		err := put(txn, i)
		if errors.Is(err, badger.ErrTxnTooBig) && pending > 0 {
			if err := txn.Commit(); err != nil {
				return err
			}
			txn = db.NewTransaction(true)
			pending = 0
			err = put(txn, i)
		}
		if err != nil {
			return err
		}
		pending++
	}
	if pending == 0 {
		return nil
	}
	return txn.Commit()
}

// zapLogger adapts a zap logger to badger.Logger.
type zapLogger struct{ s *zap.SugaredLogger }

func (l zapLogger) Errorf(f string, a ...any)   { l.s.Errorf(f, a...) }
func (l zapLogger) Warningf(f string, a ...any) { l.s.Warnf(f, a...) }
func (l zapLogger) Infof(f string, a ...any)    { l.s.Debugf(f, a...) }
func (l zapLogger) Debugf(f string, a ...any)   { l.s.Debugf(f, a...) }
