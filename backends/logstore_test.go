package backends_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// holdLog puts a file in the store directory of backend's store under
// dataDir, as a store's first open does.
func holdLog(t *testing.T, dataDir, backend, store string) {
	t.Helper()
	dir := backends.LogStoreDir(dataDir, backend, store)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "segment"), []byte("log"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func requireRecorded(t *testing.T, dataDir, want string) {
	t.Helper()
	got, err := backends.ReadLogStore(dataDir)
	if err != nil || got != want {
		t.Fatalf("recorded store %q, %v; want %q", got, err, want)
	}
}

func TestClaimLogStore(t *testing.T) {
	t.Run("new_dir_records_the_store", func(t *testing.T) {
		for _, store := range backends.LogStores() {
			dir := t.TempDir()
			if err := backends.ClaimLogStore(dir, "hashicorp", store); err != nil {
				t.Fatal(err)
			}
			requireRecorded(t, dir, store)
			fi, err := os.Stat(filepath.Join(dir, backends.LogStoreFile))
			if err != nil || fi.Mode().Perm() != backends.DataFileMode {
				t.Fatalf("record: %v, %v; want mode %04o", fi, err, backends.DataFileMode)
			}
			if err := backends.ClaimLogStore(dir, "hashicorp", store); err != nil {
				t.Fatalf("second claim with the same store: %v", err)
			}
		}
	})
	t.Run("other_store_refused_with_the_way_out", func(t *testing.T) {
		dir := t.TempDir()
		holdLog(t, dir, "hashicorp", backends.LogStoreWAL)
		if err := backends.ClaimLogStore(dir, "hashicorp", backends.LogStoreWAL); err != nil {
			t.Fatal(err)
		}
		err := backends.ClaimLogStore(dir, "hashicorp", backends.LogStoreBadger)
		if !errors.Is(err, backends.ErrWrongLogStore) {
			t.Fatalf("claim with badger of a wal data dir: %v, want ErrWrongLogStore", err)
		}
		for _, want := range []string{"--raft-log-store wal", "raft.log_store", "snapshot save", "ticketd restore"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("refusal does not say %q: %v", want, err)
			}
		}
		requireRecorded(t, dir, backends.LogStoreWAL)
	})
	t.Run("lost_record_rebuilt_from_the_log", func(t *testing.T) {
		dir := t.TempDir()
		holdLog(t, dir, "hashicorp", backends.LogStoreWAL)
		if err := backends.ClaimLogStore(dir, "hashicorp", backends.LogStoreBadger); !errors.Is(err, backends.ErrWrongLogStore) {
			t.Fatalf("claim with badger of a wal log without a record: %v, want ErrWrongLogStore", err)
		}
		if err := backends.ClaimLogStore(dir, "hashicorp", backends.LogStoreWAL); err != nil {
			t.Fatal(err)
		}
		requireRecorded(t, dir, backends.LogStoreWAL)
	})
	t.Run("badger_dir_from_before_the_record", func(t *testing.T) {
		dir := t.TempDir()
		holdLog(t, dir, "etcd", backends.LogStoreBadger)
		if err := backends.ClaimLogStore(dir, "etcd", backends.LogStoreWAL); !errors.Is(err, backends.ErrWrongLogStore) {
			t.Fatalf("claim with wal of a badger data dir: %v, want ErrWrongLogStore", err)
		}
		if err := backends.ClaimLogStore(dir, "etcd", backends.LogStoreBadger); err != nil {
			t.Fatal(err)
		}
		requireRecorded(t, dir, backends.LogStoreBadger)
	})
	t.Run("other_backends_wal_refused", func(t *testing.T) {
		dir := t.TempDir()
		holdLog(t, dir, "etcd", backends.LogStoreWAL)
		if err := backends.ClaimLogStore(dir, "hashicorp", backends.LogStoreWAL); !errors.Is(err, backends.ErrWrongBackend) {
			t.Fatalf("hashicorp claim of an etcd wal: %v, want ErrWrongBackend", err)
		}
	})
	t.Run("record_and_log_disagree", func(t *testing.T) {
		dir := t.TempDir()
		if err := backends.ClaimLogStore(dir, "hashicorp", backends.LogStoreBadger); err != nil {
			t.Fatal(err)
		}
		holdLog(t, dir, "hashicorp", backends.LogStoreWAL)
		for _, store := range backends.LogStores() {
			if err := backends.ClaimLogStore(dir, "hashicorp", store); !errors.Is(err, backends.ErrWrongLogStore) {
				t.Fatalf("claim with %s: %v, want ErrWrongLogStore", store, err)
			}
		}
	})
	t.Run("two_logs_refused", func(t *testing.T) {
		dir := t.TempDir()
		holdLog(t, dir, "hashicorp", backends.LogStoreWAL)
		holdLog(t, dir, "hashicorp", backends.LogStoreBadger)
		if err := backends.ClaimLogStore(dir, "hashicorp", backends.LogStoreWAL); !errors.Is(err, backends.ErrWrongLogStore) {
			t.Fatalf("claim of a dir with two logs: %v, want ErrWrongLogStore", err)
		}
	})
}

func TestValidateLogStore(t *testing.T) {
	cfg := backends.DefaultConfig()
	cfg.ID, cfg.RaftAddr, cfg.DataDir = "n1", "127.0.0.1:1", t.TempDir()
	cfg.StateMachine = core.NewStateMachine()
	for _, tt := range []struct {
		store string
		ok    bool
	}{{"", true}, {backends.LogStoreBadger, true}, {backends.LogStoreWAL, true}, {"bolt", false}} {
		c := cfg
		c.LogStore = tt.store
		c = c.WithDefaults()
		if err := c.Validate(); (err == nil) != tt.ok || err != nil && !errors.Is(err, backends.ErrInvalidConfig) {
			t.Fatalf("LogStore %q: Validate = %v", tt.store, err)
		}
		if tt.store == "" && c.LogStore != backends.DefaultLogStore {
			t.Fatalf("WithDefaults left LogStore %q", c.LogStore)
		}
	}
}

// TestResolveLogStore: an unset store is the one the data dir was written
// with (its record, else its log directory), so a badger data dir made
// under the earlier default still opens as badger; a new data dir gets
// DefaultLogStore; a set store is kept (and ClaimLogStore refuses a
// mismatch).
func TestResolveLogStore(t *testing.T) {
	if backends.DefaultLogStore != backends.LogStoreWAL {
		t.Fatalf("DefaultLogStore = %q, want %q", backends.DefaultLogStore, backends.LogStoreWAL)
	}
	if got := backends.ResolveLogStore(t.TempDir(), ""); got != backends.DefaultLogStore {
		t.Fatalf("new data dir resolves to %q, want %q", got, backends.DefaultLogStore)
	}
	for _, backend := range []string{"hashicorp", "etcd"} {
		for _, store := range backends.LogStores() {
			// Only the directory (a data dir from before the record existed).
			dir := t.TempDir()
			holdLog(t, dir, backend, store)
			if got := backends.ResolveLogStore(dir, ""); got != store {
				t.Fatalf("%s %s log, no record: resolves to %q", backend, store, got)
			}
			if err := backends.ClaimLogStore(dir, backend, backends.ResolveLogStore(dir, "")); err != nil {
				t.Fatalf("%s %s log: claim of the resolved store: %v", backend, store, err)
			}
			// Only the record (the log directory not made yet).
			dir = t.TempDir()
			if err := backends.ClaimLogStore(dir, backend, store); err != nil {
				t.Fatal(err)
			}
			if got := backends.ResolveLogStore(dir, ""); got != store {
				t.Fatalf("%s record %s: resolves to %q", backend, store, got)
			}
		}
	}
	dir := t.TempDir()
	holdLog(t, dir, "hashicorp", backends.LogStoreBadger)
	if got := backends.ResolveLogStore(dir, backends.LogStoreWAL); got != backends.LogStoreWAL {
		t.Fatalf("a set store resolves to %q", got)
	}
	if err := backends.ClaimLogStore(dir, "hashicorp", backends.LogStoreWAL); !errors.Is(err, backends.ErrWrongLogStore) {
		t.Fatalf("wal on a badger data dir: %v, want ErrWrongLogStore", err)
	}
	cfg := backends.Config{DataDir: dir}.WithDefaults()
	if cfg.LogStore != backends.LogStoreBadger {
		t.Fatalf("WithDefaults on a badger data dir: LogStore %q", cfg.LogStore)
	}
}
