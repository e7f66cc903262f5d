package backends

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// Raft log stores (Config.LogStore; ticketd's raft.log_store and
// --raft-log-store). Every backend offers both.
const (
	// LogStoreBadger keeps the log and the stable state (term, vote) in a
	// badger/v4 database with SyncWrites under <data-dir>/raft.
	LogStoreBadger = "badger"
	// LogStoreWAL keeps them in the write-ahead log the backend's own Raft
	// library's project uses, under <data-dir>/wal-<backend>:
	// github.com/hashicorp/raft-wal (HashiCorp's segment WAL, Consul's log
	// store) for hashicorp, etcd's server/v3/storage/wal with its snapshot
	// files for etcd. One fdatasync per appended batch, preallocated
	// segments, CRCs on every batch or record.
	LogStoreWAL = "wal"
	// DefaultLogStore is the store of a Config whose LogStore is empty and
	// whose data dir holds no log yet (ResolveLogStore). It is the WAL: one
	// durable write per appended batch where badger with SyncWrites makes
	// two msyncs (value log, then memtable log), so every commit row of the
	// benchmark is faster on it (docs/benchmarks.md#default-log-store).
	DefaultLogStore = LogStoreWAL
)

// LogStores returns the names of every log store, the default first.
func LogStores() []string { return []string{LogStoreWAL, LogStoreBadger} }

// LogStoreFile is the name of the file in a data dir that records which
// log store wrote it (ClaimLogStore).
const LogStoreFile = "log_store"

// ErrWrongLogStore: the data dir holds a Raft log written by another log
// store (or by the other backend's write-ahead log) than the one
// configured. Opening it with the configured store would find no log and
// start a new one beside the old, so the node refuses instead; the error
// says which store to configure, or how to move the data with a snapshot.
var ErrWrongLogStore = errors.New("backends: data dir holds another raft log store")

// LogStoreDir returns the directory under dataDir where the given backend
// keeps its Raft log with the given store: <dataDir>/raft for badger (both
// backends: badger's own marker key names the backend), and
// <dataDir>/wal-<backend> for the write-ahead logs, whose formats differ
// per backend so the directory names the backend too.
func LogStoreDir(dataDir, backend, store string) string {
	if store == LogStoreBadger {
		return filepath.Join(dataDir, "raft")
	}
	return filepath.Join(dataDir, "wal-"+backend)
}

// storeLayouts are the store directories a data dir can hold, for
// recognising what wrote one: backend "" means any (badger records its
// backend inside the database).
var storeLayouts = []struct{ backend, store, dir string }{
	{"", LogStoreBadger, "raft"},
	{"hashicorp", LogStoreWAL, "wal-hashicorp"},
	{"etcd", LogStoreWAL, "wal-etcd"},
}

// ClaimLogStore checks that dataDir may be opened by backend with store and
// records store in dataDir/LogStoreFile (written to a temporary file, synced,
// renamed, directory synced) when it is not recorded yet. What wrote the
// data dir is read from the record and from which store directories hold
// files (LogStoreDir); the two must agree. A record that is missing or
// unreadable is rebuilt from the directories, so losing that file changes
// nothing; a data dir whose record and directories disagree, or that holds
// two stores' logs, is refused.
//
// Errors: an error wrapping ErrWrongLogStore that names the store found and
// how to proceed (configure it, or move the data with `ticketctl snapshot
// save` and `ticketd restore --raft-log-store`), ErrWrongBackend when the
// directories show the other backend's write-ahead log, or the file
// system's. Not safe to run concurrently with a node on the same dir.
func ClaimLogStore(dataDir, backend, store string) error {
	found, err := foundStores(dataDir)
	if err != nil {
		return err
	}
	if len(found) > 1 {
		return fmt.Errorf("%w: data dir %s holds raft logs of several stores (%s); refusing to guess which is current: "+
			"move the data dir away and restore the member from a snapshot", ErrWrongLogStore, dataDir, strings.Join(found, ", "))
	}
	rec, _ := ReadLogStore(dataDir)
	if len(found) == 1 {
		fb, fstore, _ := strings.Cut(found[0], "/")
		if fb != "" && fb != backend {
			return fmt.Errorf("%w: data dir %s holds the %s backend's %s log; refusing to open it with %s",
				ErrWrongBackend, dataDir, fb, fstore, backend)
		}
		if rec != "" && rec != fstore {
			return fmt.Errorf("%w: data dir %s records log store %q in %s but holds a %s log; refusing to guess which is current: "+
				"move the data dir away and restore the member from a snapshot", ErrWrongLogStore, dataDir, rec, LogStoreFile, fstore)
		}
		rec = fstore
	}
	if rec != "" && rec != store {
		return fmt.Errorf("%w: data dir %s was written by the %q raft log store; refusing to open it with %q "+
			"(it would start an empty log beside the old one): set raft.log_store: %s (--raft-log-store %s), "+
			"or move the data to %s with `ticketctl snapshot save` and `ticketd restore --raft-log-store %s` into an empty data dir",
			ErrWrongLogStore, dataDir, rec, store, rec, rec, store, store)
	}
	if got, err := ReadLogStore(dataDir); err == nil && got == store {
		return nil
	}
	return writeLogStore(dataDir, store)
}

// ResolveLogStore returns the store a node on dataDir opens: store when it
// is set; otherwise the store that wrote dataDir (its LogStoreFile record,
// else the one store directory holding files, as ClaimLogStore reads them),
// so a data dir keeps its store when the configuration names none, even
// one written before the default changed; otherwise DefaultLogStore. A data
// dir whose record and directories disagree, or that holds several logs,
// resolves to DefaultLogStore and ClaimLogStore then refuses it.
func ResolveLogStore(dataDir, store string) string {
	if store != "" {
		return store
	}
	if dataDir == "" {
		return DefaultLogStore
	}
	found, err := foundStores(dataDir)
	if err != nil || len(found) > 1 {
		return DefaultLogStore
	}
	rec, _ := ReadLogStore(dataDir)
	if len(found) == 1 {
		_, fstore, _ := strings.Cut(found[0], "/")
		if rec != "" && rec != fstore {
			return DefaultLogStore
		}
		return fstore
	}
	if rec != "" {
		return rec
	}
	return DefaultLogStore
}

// newestLogGlobs maps each log store to the files under a data dir that hold
// its newest appends: badger's memtable write-ahead logs (*.mem), the
// write-ahead log stores' segments (*.wal: hashicorp's raft-wal keeps them
// in wal-hashicorp, etcd's WAL in wal-etcd/wal).
var newestLogGlobs = map[string][]string{
	LogStoreBadger: {filepath.Join("raft", "*.mem")},
	LogStoreWAL:    {filepath.Join("wal-*", "*.wal"), filepath.Join("wal-*", "wal", "*.wal")},
}

// NewestLogFile returns the file of dataDir's log store (as its
// LogStoreFile records it) that holds the newest appends, and the store:
// the newest badger memtable log or write-ahead log segment. Every store
// names these files with zero-padded numbers, so the last in order is the
// newest. For tests and fault injection that damage a stopped node's log
// as a failing disk would. Errors: no record (ReadLogStore's), or no such
// file.
func NewestLogFile(dataDir string) (path, store string, err error) {
	store, err = ReadLogStore(dataDir)
	if err != nil {
		return "", "", err
	}
	var files []string
	for _, pattern := range newestLogGlobs[store] {
		m, err := filepath.Glob(filepath.Join(dataDir, pattern))
		if err != nil {
			return "", store, err
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return "", store, fmt.Errorf("backends: no %s log file under %s", store, dataDir)
	}
	slices.Sort(files)
	return files[len(files)-1], store, nil
}

// DurableLogEnd returns the last index that dataDir's watermark records as
// durably appended (docs/design.md#storage-and-recovery): a node whose log
// lost or changed an entry at or below it refuses to start, while an
// entry above it may be one a crash took before its append returned. For
// fault injection that damages a stopped node's log, and for watching a
// running node's appends (the mark is read without opening it for
// writing). Errors: the watermark's (missing or damaged).
func DurableLogEnd(dataDir string) (uint64, error) {
	m, err := watermark.Read(dataDir)
	return m.LastIndex, err
}

// ReadLogStore returns the log store recorded in dataDir/LogStoreFile, or
// an error when the file is missing or does not name a store.
func ReadLogStore(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, LogStoreFile))
	if err != nil {
		return "", err
	}
	s := string(bytes.TrimSpace(b))
	if !slices.Contains(LogStores(), s) {
		return "", fmt.Errorf("backends: %s: %q is not a log store", filepath.Join(dataDir, LogStoreFile), s)
	}
	return s, nil
}

// foundStores lists, as "backend/store" ("/badger" for badger), the store
// directories under dataDir that hold at least one file.
func foundStores(dataDir string) ([]string, error) {
	var found []string
	for _, l := range storeLayouts {
		entries, err := os.ReadDir(filepath.Join(dataDir, l.dir))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("backends: data dir %s: %w", dataDir, err)
		}
		if len(entries) > 0 {
			found = append(found, l.backend+"/"+l.store)
		}
	}
	return found, nil
}

// writeLogStore durably replaces dataDir/LogStoreFile with store.
func writeLogStore(dataDir, store string) error {
	path := filepath.Join(dataDir, LogStoreFile)
	if err := WriteFileDurably(path, []byte(store+"\n")); err != nil {
		return fmt.Errorf("backends: record log store in %s: %w", path, err)
	}
	return nil
}
