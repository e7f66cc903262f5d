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
	// DamageLog: kill -9 a random node, flip DamageBytes bytes in the
	// payload of an entry its log store appended (DamageSpot: the newest
	// entry at or below the index its watermark records as durable, in
	// the store's newest file holding one: badger's memtable log *.mem,
	// or the write-ahead log's segment *.wal), as a failing disk would,
	// and start it: it must refuse to start (the store reads the entry
	// back with a CRC mismatch, or cuts its log short before the index
	// its watermark records) rather than rejoin with a damaged or shorter
	// log. Healed after Duration by restoring the bytes and starting it
	// again.
	DamageLog Kind = "damage-log"
	// DiskFull: kill -9 a random node and start it on a file system with
	// less free space than the node keeps in reserve before each write,
	// every file of its data dir holding the space it held (a
	// preallocated segment stays allocated, as on the disk it came from);
	// its first log append (or snapshot) must stop it with its fail-stop
	// exit, an error that says the disk is full (not a SIGBUS from inside
	// badger, nor a Go panic), and it must append nothing while the disk
	// is full. The disk stays full for
	// Duration and then until the node has stopped (at most
	// diskFullWait); healed by moving its data back to a roomy file
	// system and starting it again.
	DiskFull Kind = "disk-full"
)

// refuseWait bounds how long a node started on a damaged log is given to
// refuse: it opens its log store, reads it and exits, on a loaded machine.
const refuseWait = 15 * time.Second

// diskFullWait bounds how long a node on a full disk is given to stop. It
// stops at its first append, which comes when the leader next sends it
// entries: hashicorp/raft backs off from a follower whose RPCs failed
// while it was down, by up to 10.24 s (failureWait 10 ms doubled up to
// maxFailureScale 12, hashicorp/raft replication.go), on top of the
// node's own restart on a loaded machine.
const diskFullWait = 30 * time.Second

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
	// DamageLog flips DamageBytes bytes of an appended entry's payload in
	// node i's log store (DamageSpot, at or below LogEnd(i)) and returns
	// the function that restores them.
	DamageLog(i int) (restore func() error, err error)
	// FillDisk moves node i's data dir onto a file system that is all but
	// full: less free space than the node keeps in reserve, every file
	// holding the space it held before; FreeDisk moves it back (node i is
	// killed before each).
	FillDisk(i int) error
	FreeDisk(i int) error
	// Exited reports whether node i's process has exited since it was last
	// started (it refused to start, or stopped itself on a fatal error), and
	// its log says why.
	Exited(i int) (bool, string)
	// LogEnd returns the last index node i's data dir records as durably
	// appended (its watermark), also while the node runs.
	LogEnd(i int) (uint64, error)
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
		return func(ctx context.Context) error {
			exited, why, interrupted := waitExited(ctx, dt, i, refuseWait)
			var refused error
			switch {
			case !exited && interrupted:
				refused = fmt.Errorf("nemesis: node %d with a damaged log: the run ended before it refused or ran for %v (not checked)", i, refuseWait)
			case !exited:
				refused = fmt.Errorf("nemesis: node %d started with a damaged log instead of refusing", i)
			case why == "":
				refused = fmt.Errorf("nemesis: node %d exited with a damaged log but did not say why", i)
			case !strings.Contains(why, "refus"):
				refused = fmt.Errorf("nemesis: node %d exited with a damaged log without refusing to start: log %q", i, why)
			}
			return errors.Join(refused, e.repair(i))
		}, []int{i}, true, nil
	default: // DiskFull
		if err := dt.FillDisk(i); err != nil {
			return nil, []int{i}, true, errors.Join(err, e.start(i))
		}
		e.disk = append(e.disk, i)
		before, err := dt.LogEnd(i)
		if err != nil {
			return nil, []int{i}, true, errors.Join(err, e.freeDisk(dt, i))
		}
		if err := e.start(i); err != nil {
			return nil, []int{i}, true, err
		}
		return func(ctx context.Context) error {
			return errors.Join(diskFullOutcome(ctx, dt, i, before), e.freeDisk(dt, i))
		}, []int{i}, true, nil
	}
}

// diskFullOutcome waits for node i, started on a full disk with its log
// durably ending at index before, to stop, and says what went wrong: it
// died of a Go panic (its fail-stop exits with status 1 and no crash dump,
// docs/operations.md#failure-handling); it exited without saying the disk
// is full; it appended entries on the full
// disk (its watermark passed before), whether it then stopped or not; or
// it still runs and no entry reached it in time (the fault was not
// exercised: reported, not taken as a pass).
func diskFullOutcome(ctx context.Context, dt DiskTarget, i int, before uint64) error {
	exited, why, interrupted := waitExited(ctx, dt, i, diskFullWait)
	end, err := dt.LogEnd(i)
	switch {
	case exited && strings.HasPrefix(why, "panic"):
		return fmt.Errorf("nemesis: node %d on a full disk stopped with a Go panic, not its fail-stop exit: log %q", i, why)
	case exited && !strings.Contains(why, "disk full"):
		return fmt.Errorf("nemesis: node %d on a full disk exited without saying the disk is full: log %q", i, why)
	case err != nil:
		return fmt.Errorf("nemesis: node %d on a full disk (exited %v): its watermark: %w", i, exited, err)
	case end > before:
		return fmt.Errorf("nemesis: node %d on a full disk appended entries %d-%d (exited %v); want a stop at its first append", i, before+1, end, exited)
	case exited:
		return nil
	case interrupted:
		return fmt.Errorf("nemesis: node %d on a full disk: the run ended before it was sent an entry (not exercised)", i)
	}
	return fmt.Errorf("nemesis: node %d on a full disk was sent no entry in %v (not exercised)", i, diskFullWait)
}

// waitExited polls node i until it has exited, wait has passed, or ctx
// ends (interrupted).
func waitExited(ctx context.Context, dt DiskTarget, i int, wait time.Duration) (exited bool, why string, interrupted bool) {
	deadline := time.Now().Add(wait)
	for {
		if exited, why = dt.Exited(i); exited || time.Now().After(deadline) {
			return exited, why, false
		}
		if !sleep(ctx, 100*time.Millisecond) {
			exited, why = dt.Exited(i)
			return exited, why, true
		}
	}
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
