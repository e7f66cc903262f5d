package server

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/server/applytime"
	"github.com/ticketd/ticketd/server/config"
)

// This file opens the node's record of when it applied each log index
// (applytime), which lets a restarted node measure the leases it replays
// from its earlier run's apply rather than from the replay
// (docs/design.md#leases).

// hasRaftState reports whether dir holds a Raft log or snapshots (of any
// backend and log store). A read error counts as no: the record is then
// discarded, which only makes replayed leases later.
func hasRaftState(dir string) bool {
	return errors.Is(backends.CheckRestoreTarget(dir), backends.ErrDataDirInUse)
}

// openApplyTimes opens cfg's record in the data dir before the backend opens
// (its replay is recorded too). A record found in a dir without Raft state
// is discarded: its indexes named another log (a fresh bootstrap, an empty
// dir joining, a restore). A full disk (no room to allocate the whole
// file) is an error wrapping syscall.ENOSPC or EDQUOT that says the disk is
// full: the node cannot start, and stops as on a full disk at any write
// (fail-stop, docs/design.md#storage-and-recovery; the process exits with
// status 1 and that line). Any other failure (a host without boot id or
// mmap, a data dir that cannot be written, which the backend then reports
// itself) leaves the node without the record: it logs why and measures
// replayed leases from the replay, later than the client's start (never
// early).
func openApplyTimes(cfg config.Config, o options, log *zap.Logger) (*applytime.Record, error) {
	if err := backends.PrepareDataDir(cfg.DataDir); err != nil {
		return nil, nil // the backend refuses the dir with this error
	}
	host, now := o.host, time.Now
	switch {
	case o.clock != nil && host == nil:
		// A test's lessor clock (WithClock) and the host's clock do not
		// agree on elapsed time: a record kept on one and read on the other
		// could end a lease early.
		return nil, nil
	case host == nil:
		host = applytime.HostClock()
	}
	if o.clock != nil {
		now = o.clock.Now
	}
	hasLog := o.hasLog
	if hasLog == nil {
		hasLog = hasRaftState
	}
	rec, err := applytime.Open(applytime.Config{
		Path: filepath.Join(cfg.DataDir, applytime.FileName),
		Span: time.Duration(cfg.Lease.MaxMS) * time.Millisecond,
		Host: host,
		Now:  now,
		Keep: hasLog(cfg.DataDir),
		OnFault: func(err error) {
			log.Warn("the apply-time record stopped recording: a restart measures leases applied since from the replay (later than needed, never early)", zap.Error(err))
		},
	})
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return nil, fmt.Errorf("disk full: no room for the apply-time record: %w: free space (or move the data dir to a larger disk) and restart the node", err)
	}
	if err != nil {
		log.Warn("no apply-time record: a restart measures replayed leases from the replay (later than needed, never early)", zap.Error(err))
		return nil, nil
	}
	return rec, nil
}

// withApplyTimes makes the node keep its apply-time record on host, and
// take hasLog's answer for whether its data dir holds Raft state: for tests
// with a fake lessor clock (WithClock; host must run with it) and a backend
// that keeps its log outside the data dir.
func withApplyTimes(host applytime.Host, hasLog func(dir string) bool) Option {
	return func(o *options) { o.host, o.hasLog = host, hasLog }
}
