package watermark_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ticketd/ticketd/backends/internal/watermark"
)

func TestStoreSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	w, m, err := watermark.Open(dir, newDataDir, watermark.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m != (watermark.Mark{}) {
		t.Fatalf("new file mark %+v, want zero", m)
	}
	want := watermark.Mark{LastIndex: 511, Applied: 509}
	if err := w.Store(want); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Store(want); !errors.Is(err, watermark.ErrClosed) {
		t.Fatalf("store after close: %v, want ErrClosed", err)
	}
	w, m, err = watermark.Open(dir, logUpTo(511), watermark.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	if m != want || w.Mark() != want {
		t.Fatalf("reopened mark %+v, want %+v", m, want)
	}
}

func TestDamagedFileRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"flipped_byte", func(b []byte) []byte { b[3] ^= 0xff; return b }},
		{"cut_short", func(b []byte) []byte { return b[:7] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, _, err := watermark.Open(dir, newDataDir, watermark.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Store(watermark.Mark{LastIndex: 40, Applied: 39}); err != nil {
				t.Fatal(err)
			}
			_ = w.Close()
			path := filepath.Join(dir, watermark.FileName)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, _, err := watermark.Open(dir, logUpTo(40), watermark.Options{}); !errors.Is(err, watermark.ErrCorrupt) || !errors.Is(err, watermark.ErrMissing) {
				t.Fatalf("open damaged file: %v, want ErrCorrupt and ErrMissing", err)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	m := watermark.Mark{LastIndex: 511}
	if err := watermark.Check(m, 511); err != nil {
		t.Fatalf("log at the mark: %v", err)
	}
	if err := watermark.Check(m, 600); err != nil {
		t.Fatalf("log past the mark: %v", err)
	}
	err := watermark.Check(m, 483)
	var gap *watermark.GapError
	if !errors.Is(err, watermark.ErrLogShortened) || !errors.As(err, &gap) || gap.Found != 483 || gap.Recorded != 511 {
		t.Fatalf("short log: %v, want a GapError 483 < 511", err)
	}
	if !strings.Contains(err.Error(), "484-511") || !strings.Contains(err.Error(), "RemoveMember") {
		t.Fatalf("error does not name the gap and the recovery: %v", err)
	}
}

// BenchmarkStore measures one durable Store (a 20-byte O_DSYNC write): the
// cost the watermark adds to every Raft append batch.
func BenchmarkStore(b *testing.B) {
	w, _, err := watermark.Open(b.TempDir(), newDataDir, watermark.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.Store(watermark.Mark{LastIndex: uint64(i + 1)}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRead reads what an open node stored, from beside it, and refuses a
// missing or cut file.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	if _, err := watermark.Read(dir); err == nil {
		t.Fatal("Read of a dir without a watermark succeeded")
	}
	w, _, err := watermark.Open(dir, newDataDir, watermark.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	want := watermark.Mark{LastIndex: 77, Applied: 70}
	if err := w.Store(want); err != nil {
		t.Fatal(err)
	}
	if got, err := watermark.Read(dir); err != nil || got != want {
		t.Fatalf("Read: %+v, %v; want %+v", got, err, want)
	}
	if err := os.Truncate(filepath.Join(dir, watermark.FileName), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := watermark.Read(dir); !errors.Is(err, watermark.ErrCorrupt) {
		t.Fatalf("Read of a cut file: %v, want ErrCorrupt", err)
	}
}
