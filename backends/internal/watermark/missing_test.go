package watermark_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// storedLog stands in for a node's Raft stores, the layer below the
// watermark. The backends' tests check the real stores (backendtest).
type storedLog watermark.Extent

func (l storedLog) Extent() (watermark.Extent, error) { return watermark.Extent(l), nil }

// newDataDir is the stores of a node that never ran.
var newDataDir = storedLog{}

// logUpTo is stores holding a whole log [1, last] of term 1.
func logUpTo(last uint64) storedLog {
	return storedLog{First: 1, Last: last, Term: 1, LastTerm: 1}
}

// losses are the ways a data dir loses its mark: the file deleted (a lost
// directory entry, a copy made without it), cut to 0 bytes (a file that
// comes back empty after a crash), or overwritten with garbage.
var losses = []struct {
	name  string
	cause string // in the refusal
	lose  func(t *testing.T, path string)
}{
	{"deleted", "watermark file is missing", func(t *testing.T, path string) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}},
	{"empty", "watermark file is empty (0 bytes)", func(t *testing.T, path string) {
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
	}},
	{"garbage", "watermark file is unreadable (watermark: damaged watermark file", func(t *testing.T, path string) {
		if err := os.WriteFile(path, []byte("not a watermark record at all, 41 bytes.."), 0o600); err != nil {
			t.Fatal(err)
		}
	}},
}

// markedDir returns a data dir whose watermark records LastIndex 90.
func markedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	w, _, err := watermark.Open(dir, newDataDir, watermark.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Store(watermark.Mark{LastIndex: 90, Applied: 88}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMissingMarkRefused: stores holding a log beside a watermark that is
// missing, empty or unreadable are refused, with an error naming what is
// missing and both ways to recover, and the file is left as it was.
func TestMissingMarkRefused(t *testing.T) {
	for _, tc := range losses {
		t.Run(tc.name, func(t *testing.T) {
			dir := markedDir(t)
			path := filepath.Join(dir, watermark.FileName)
			tc.lose(t, path)
			before, _ := os.ReadFile(path)
			_, _, err := watermark.Open(dir, logUpTo(60), watermark.Options{})
			var missing *watermark.MissingError
			if !errors.Is(err, watermark.ErrMissing) || !errors.As(err, &missing) || missing.Last != 60 {
				t.Fatalf("open: %v, want a *MissingError at index 60", err)
			}
			for _, want := range []string{tc.cause, dir, "RemoveMember", "AddMember", "--accept-missing-watermark", "refuses to start"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("refusal %q does not say %q", err, want)
				}
			}
			after, err := os.ReadFile(path)
			if tc.name == "deleted" && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("refused open created the watermark file (%v)", err)
			}
			if string(after) != string(before) {
				t.Fatalf("refused open changed the file: %q, was %q", after, before)
			}
		})
	}
}

// TestAcceptMissingMark: with AcceptMissing the same data dirs start, a
// warn-level audit line says so, and a fresh mark at the log's end is
// written (and found by the next Open).
func TestAcceptMissingMark(t *testing.T) {
	for _, tc := range losses {
		t.Run(tc.name, func(t *testing.T) {
			dir := markedDir(t)
			tc.lose(t, filepath.Join(dir, watermark.FileName))
			core, logs := observer.New(zapcore.DebugLevel)
			w, m, err := watermark.Open(dir, logUpTo(60), watermark.Options{AcceptMissing: true, Logger: zap.New(core)})
			if err != nil {
				t.Fatal(err)
			}
			if m != (watermark.Mark{LastIndex: 60}) {
				t.Fatalf("fresh mark %+v, want LastIndex 60", m)
			}
			audit := logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("accept-missing-watermark").All()
			if len(audit) != 1 || audit[0].ContextMap()["data_dir"] != dir {
				t.Fatalf("audit lines %+v, want one warning naming the data dir", logs.All())
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			w, m, err = watermark.Open(dir, logUpTo(60), watermark.Options{})
			if err != nil || m != (watermark.Mark{LastIndex: 60}) {
				t.Fatalf("reopen after accepting: %+v, %v", m, err)
			}
			_ = w.Close()
			// Now the mark guards the log again.
			if _, _, err := watermark.Open(dir, logUpTo(59), watermark.Options{AcceptMissing: true}); !errors.Is(err, watermark.ErrLogShortened) {
				t.Fatalf("log shortened after the fresh mark: %v, want ErrLogShortened even with AcceptMissing", err)
			}
		})
	}
}

// TestNewDataDirStarts: stores with no state and no usable watermark are a
// new node: a zero mark is written, nothing is logged.
func TestNewDataDirStarts(t *testing.T) {
	for _, tc := range losses {
		t.Run(tc.name, func(t *testing.T) {
			dir := markedDir(t)
			tc.lose(t, filepath.Join(dir, watermark.FileName))
			core, logs := observer.New(zapcore.DebugLevel)
			w, m, err := watermark.Open(dir, newDataDir, watermark.Options{Logger: zap.New(core)})
			if err != nil || m != (watermark.Mark{}) {
				t.Fatalf("new data dir: %+v, %v", m, err)
			}
			_ = w.Close()
			if logs.Len() != 0 {
				t.Fatalf("logged %+v for a new data dir", logs.All())
			}
			if b, _ := os.ReadFile(filepath.Join(dir, watermark.FileName)); len(b) != 20 {
				t.Fatalf("watermark file holds %d bytes, want one 20-byte record", len(b))
			}
		})
	}
}

// TestCreate: Create writes a mark that Open then holds the log to.
func TestCreate(t *testing.T) {
	dir := markedDir(t)
	if err := watermark.Create(dir, watermark.Mark{LastIndex: 7}); err != nil {
		t.Fatal(err)
	}
	w, m, err := watermark.Open(dir, logUpTo(7), watermark.Options{})
	if err != nil || m != (watermark.Mark{LastIndex: 7}) {
		t.Fatalf("open after Create: %+v, %v", m, err)
	}
	_ = w.Close()
}

// TestHoleRefused: stores that Raft cannot have written as they are (a log
// starting past the snapshot, a term below the last entry's) are refused
// whatever the watermark says, naming what is missing and how to recover;
// a log overlapping its snapshot, or one starting right after it, is not.
func TestHoleRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		ext  watermark.Extent
		want string // "" for a start
	}{
		{"entries_after_snapshot_missing", watermark.Extent{Snapshot: 40, First: 61, Last: 90, Term: 3, LastTerm: 3}, "entries 41-60 are missing"},
		{"no_snapshot_log_from_61", watermark.Extent{First: 61, Last: 90, Term: 3, LastTerm: 3}, "entries 1-60 are missing"},
		{"term_lost", watermark.Extent{First: 1, Last: 90, Term: 0, LastTerm: 3}, "term 0 is below the term 3"},
		{"term_behind", watermark.Extent{Snapshot: 90, Term: 2, LastTerm: 3}, "term 2 is below the term 3"},
		{"log_overlaps_snapshot", watermark.Extent{Snapshot: 80, First: 61, Last: 90, Term: 3, LastTerm: 3}, ""},
		{"log_right_after_snapshot", watermark.Extent{Snapshot: 60, First: 61, Last: 90, Term: 3, LastTerm: 3}, ""},
		{"snapshot_only", watermark.Extent{Snapshot: 90, Term: 1, LastTerm: 1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := markedDir(t)
			w, _, err := watermark.Open(dir, storedLog(tc.ext), watermark.Options{AcceptMissing: true})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("whole stores refused: %v", err)
				}
				_ = w.Close()
				return
			}
			var hole *watermark.HoleError
			if !errors.As(err, &hole) || !errors.Is(err, watermark.ErrLogShortened) {
				t.Fatalf("open: %v, want a *HoleError", err)
			}
			for _, want := range []string{tc.want, dir, "RemoveMember", "refusing to start"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("refusal %q does not say %q", err, want)
				}
			}
		})
	}
}
