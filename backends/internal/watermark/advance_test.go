package watermark_test

import (
	"errors"
	"math"
	"testing"

	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// reopenMark closes w and returns the mark the file in dir holds.
func reopenMark(t *testing.T, dir string, w *watermark.File) watermark.Mark {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, m, err := watermark.Open(dir, logUpTo(math.MaxUint64), watermark.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAdvance(t *testing.T) {
	tests := []struct {
		name string
		do   func(w *watermark.File) error
		want watermark.Mark
	}{
		{"flush_writes_the_newest", func(w *watermark.File) error {
			for i := uint64(1); i <= 50; i++ {
				if err := w.Advance(i, i-1); err != nil {
					return err
				}
			}
			return w.Flush()
		}, watermark.Mark{LastIndex: 50, Applied: 49}},
		{"close_writes_the_pending", func(w *watermark.File) error {
			return w.Advance(7, 3)
		}, watermark.Mark{LastIndex: 7, Applied: 3}},
		{"applied_never_lowered", func(w *watermark.File) error {
			if err := w.Advance(9, 8); err != nil {
				return err
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return w.Advance(10, 2)
		}, watermark.Mark{LastIndex: 10, Applied: 8}},
		{"applied_alone_keeps_last", func(w *watermark.File) error {
			if err := w.Advance(9, 1); err != nil {
				return err
			}
			return w.AdvanceApplied(5)
		}, watermark.Mark{LastIndex: 9, Applied: 5}},
		{"lowering_update_absorbs_pending", func(w *watermark.File) error {
			if err := w.Advance(100, 90); err != nil {
				return err
			}
			// A suffix truncation: LastIndex lowered below what Advance
			// asked for; the background write must not undo it.
			return w.Update(func(m watermark.Mark) watermark.Mark {
				if m.LastIndex != 100 {
					t.Errorf("Update saw LastIndex %d, want the pending 100", m.LastIndex)
				}
				m.LastIndex = min(m.LastIndex, 50)
				return m
			})
		}, watermark.Mark{LastIndex: 50, Applied: 90}},
		{"store_drops_pending", func(w *watermark.File) error {
			if err := w.Advance(100, 90); err != nil {
				return err
			}
			return w.Store(watermark.Mark{LastIndex: 20, Applied: 10})
		}, watermark.Mark{LastIndex: 20, Applied: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w, _, err := watermark.Open(dir, newDataDir, watermark.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.do(w); err != nil {
				t.Fatal(err)
			}
			if got := reopenMark(t, dir, w); got != tt.want {
				t.Fatalf("mark on disk %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAdvanceAfterCloseFails(t *testing.T) {
	w, _, err := watermark.Open(t.TempDir(), newDataDir, watermark.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Advance(1, 1); !errors.Is(err, watermark.ErrClosed) {
		t.Fatalf("Advance after Close: %v, want ErrClosed", err)
	}
}
