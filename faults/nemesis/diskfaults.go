package nemesis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Disk fault kinds (docs/design.md#storage-and-recovery): they need a Target that also meets
// DiskTarget. Lost unsynced writes (a power loss) are PowerCut's, over a
// PowerTarget (powerfaults.go). The checkers then decide whether the
// cluster lost anything it acknowledged.
const (
	// DamageLog: kill -9 a random node, flip 4 bytes near the end of the
	// file holding its log store's newest appends (badger's memtable log
	// *.mem, or the write-ahead log's tail segment *.wal), as a failing disk
	// would, and start it: it must refuse to start (its log ends before the
	// index its watermark records) rather than rejoin with a shorter log.
	// Healed after Duration by restoring the bytes and starting it again.
	DamageLog Kind = "damage-log"
	// DiskFull: kill -9 a random node and start it on a file system with
	// almost no space left; its next write must stop it with an error that
	// says the disk is full (not a SIGBUS from inside badger). Healed after
	// Duration by moving its data back to a roomy file system and starting
	// it again.
	DiskFull Kind = "disk-full"
)

// DiskKinds lists the disk fault kinds; a schedule for a DiskTarget may take
// append(Kinds, DiskKinds...).
var DiskKinds = []Kind{DamageLog, DiskFull}

// ErrNotDisk: a disk fault (DiskKinds) was scheduled for a Target that is
// not a DiskTarget; it was skipped.
var ErrNotDisk = errors.New("nemesis: target has no disk faults")

// DiskTarget is a Target whose nodes' data dirs the Executor may damage;
// found by type assertion, like NetTarget. Node i is killed (Kill) before
// each call and started by the Executor after it.
type DiskTarget interface {
	Target
	// DamageLog flips 4 bytes near the end of the file holding the newest
	// appends of node i's log store and returns the function that restores
	// them.
	DamageLog(i int) (restore func() error, err error)
	// FillDisk moves node i's data dir onto a file system that is all but
	// full; FreeDisk moves it back (node i is killed before each).
	FillDisk(i int) error
	FreeDisk(i int) error
	// Exited reports whether node i's process has exited since it was last
	// started (it refused to start, or stopped itself on a fatal error), and
	// its log says why.
	Exited(i int) (bool, string)
}

// injectDisk starts a disk fault; handled is false for a kind it does not know.
func (e *Executor) injectDisk(f Fault) (heal func(context.Context) error, nodes []int, handled bool, err error) {
	switch f.Kind {
	case DamageLog, DiskFull:
	default:
		return nil, nil, false, nil
	}
	dt, ok := e.target.(DiskTarget)
	if !ok {
		return nil, nil, true, fmt.Errorf("%w: %s", ErrNotDisk, f.Kind)
	}
	i := pick(e.others(-1), f.Pick)
	if e.removed[i] {
		return nil, []int{i}, true, fmt.Errorf("nemesis: node %d is removed; no disk fault", i)
	}
	if err := e.kill(i); err != nil {
		return nil, []int{i}, true, err
	}
	switch f.Kind {
	case DamageLog:
		restore, err := dt.DamageLog(i)
		if err != nil {
			return nil, []int{i}, true, errors.Join(err, e.start(i))
		}
		if e.damaged == nil {
			e.damaged = map[int]func() error{}
		}
		e.damaged[i] = restore
		if err := e.start(i); err != nil {
			return nil, []int{i}, true, errors.Join(err, e.repair(i))
		}
		return func(context.Context) error {
			exited, why := waitExited(dt, i)
			var refused error
			if !exited {
				refused = fmt.Errorf("nemesis: node %d started with a damaged log instead of refusing", i)
			} else if why == "" {
				refused = fmt.Errorf("nemesis: node %d exited with a damaged log but did not say why", i)
			}
			return errors.Join(refused, e.repair(i))
		}, []int{i}, true, nil
	default: // DiskFull
		if err := dt.FillDisk(i); err != nil {
			return nil, []int{i}, true, errors.Join(err, e.start(i))
		}
		e.disk = append(e.disk, i)
		if err := e.start(i); err != nil {
			return nil, []int{i}, true, err
		}
		return func(context.Context) error {
			exited, why := waitExited(dt, i)
			var stopped error
			if !exited || !strings.Contains(why, "disk full") {
				stopped = fmt.Errorf("nemesis: node %d on a full disk: exited %v, log %q; want an exit that says the disk is full", i, exited, why)
			}
			return errors.Join(stopped, e.freeDisk(dt, i))
		}, []int{i}, true, nil
	}
}

// waitExited gives node i a few seconds to exit, polling.
func waitExited(dt DiskTarget, i int) (bool, string) {
	for range 50 {
		if ok, why := dt.Exited(i); ok {
			return ok, why
		}
		time.Sleep(100 * time.Millisecond)
	}
	return dt.Exited(i)
}

// freeDisk kills node i, moves its data back off the full file system and
// starts it again.
func (e *Executor) freeDisk(dt DiskTarget, i int) error {
	err := errors.Join(e.kill(i), dt.FreeDisk(i))
	for j, d := range e.disk {
		if d == i {
			e.disk = append(e.disk[:j], e.disk[j+1:]...)
			break
		}
	}
	return errors.Join(err, e.start(i))
}

// repair kills node i, restores the bytes DamageLog flipped and starts it.
func (e *Executor) repair(i int) error {
	restore := e.damaged[i]
	delete(e.damaged, i)
	return errors.Join(e.kill(i), restore(), e.start(i))
}

// healDisk undoes every disk fault still in effect (HealAll).
func (e *Executor) healDisk() error {
	dt, ok := e.target.(DiskTarget)
	if !ok {
		return nil
	}
	var errs []error
	for i := range e.damaged {
		errs = append(errs, e.repair(i))
	}
	for _, i := range append([]int(nil), e.disk...) {
		errs = append(errs, e.freeDisk(dt, i))
	}
	return errors.Join(errs...)
}
