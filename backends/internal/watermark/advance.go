package watermark

import (
	"errors"
	"sync"
	"time"
)

// pending is the mark Advance asked for and the background writer has not
// written yet, and the writer's first failure. Guarded by File.pmu.
type pending struct {
	set     bool   // LastIndex below is asked for
	last    uint64 // Mark.LastIndex to write
	applied uint64 // Mark.Applied to raise to
	err     error  // the background writer's first failure (sticky)
}

// asyncWriter is the goroutine that writes what Advance asks for, started
// by Open and stopped by Close.
type asyncWriter struct {
	wake     chan struct{} // capacity 1: a write is wanted
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// startAsync starts w's background writer; Open calls it once.
func (w *File) startAsync() {
	w.async.wake = make(chan struct{}, 1)
	w.async.quit = make(chan struct{})
	w.async.done = make(chan struct{})
	go w.runAsync()
}

// Advance records, without waiting for the disk, that the log durably
// reaches last (an append up to last has been synced) and that applied was
// applied; a background goroutine writes the newest such mark AdvanceDelay
// later (one synced 20-byte write, coalescing every Advance made
// meanwhile). So the watermark's write overlaps the next appends' syncs
// instead of adding to every append's latency, and it still
// never passes the durable
// log: the caller calls Advance only after the append is durable, and a
// synchronous Update or Store (a suffix lowering) absorbs a pending Advance
// before it writes, so a later background write cannot undo it.
//
// The price: the mark trails the log by the appends of about AdvanceDelay
// plus one watermark write (one fsync), and covers the last batch only once
// the background write lands; damage that cuts exactly those entries right
// after a crash goes unnoticed. Close (and Update) write the pending mark.
//
// The caller must not call Advance concurrently with a change that lowers
// LastIndex (the backends call both from their single log writer).
// Applied is never lowered. Errors: ErrClosed, or the first failure of a
// background write, returned by every later call (the node must stop).
func (w *File) Advance(last, applied uint64) error {
	return w.advance(true, last, applied)
}

// AdvanceApplied is Advance for the applied index alone: LastIndex is left
// as it is. Errors are Advance's.
func (w *File) AdvanceApplied(applied uint64) error {
	return w.advance(false, 0, applied)
}

func (w *File) advance(setLast bool, last, applied uint64) error {
	w.pmu.Lock()
	if w.pend.err != nil {
		err := w.pend.err
		w.pmu.Unlock()
		return err
	}
	if setLast {
		w.pend.set, w.pend.last = true, last
	}
	w.pend.applied = max(w.pend.applied, applied)
	w.pmu.Unlock()
	select {
	case w.async.wake <- struct{}{}:
	default:
	}
	return nil
}

// Flush writes the mark Advance last asked for, if it is not written yet,
// and returns when it is durable. Errors are Store's.
func (w *File) Flush() error {
	return w.Update(func(m Mark) Mark { return m })
}

// AdvanceDelay is how long the background writer lets Advances gather
// before it writes the newest (2 ms). Every synced write is a device cache
// flush, and flushes of two files do not merge: writing after every append
// would keep the disk doing one watermark flush per append beside badger's
// own, and appends pay for it in queueing (measured on the
// project's virtio disk: the delayed writer cut a one-entry append to
// 0.70-0.86× of the undelayed one in the same run). It bounds how far the
// mark trails the log under load to the appends of about this long.
const AdvanceDelay = 2 * time.Millisecond

// runAsync writes pending marks until stop.
func (w *File) runAsync() {
	defer close(w.async.done)
	delay := time.NewTimer(AdvanceDelay)
	defer delay.Stop()
	for {
		select {
		case <-w.async.quit:
			return
		case <-w.async.wake:
		}
		delay.Reset(AdvanceDelay)
		select {
		case <-w.async.quit:
			return // Close writes what is pending
		case <-delay.C:
		}
		err := w.Flush()
		if err != nil {
			w.pmu.Lock()
			if w.pend.err == nil {
				w.pend.err = err
			}
			w.pmu.Unlock()
			if errors.Is(err, ErrClosed) {
				return
			}
		}
	}
}

// stop ends the background writer, if it was started, and waits for it.
func (a *asyncWriter) stop() {
	a.stopOnce.Do(func() {
		close(a.quit)
		<-a.done
	})
}

// takePending returns the mark stored with the pending Advance applied to it,
// and clears it; w.mu is held. Errors: the background writer's failure.
func (w *File) takePending() (Mark, error) {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	if w.pend.err != nil {
		return w.mark, w.pend.err
	}
	m := w.mark
	if w.pend.set {
		m.LastIndex = w.pend.last
	}
	m.Applied = max(m.Applied, w.pend.applied)
	w.pend = pending{}
	return m, nil
}
