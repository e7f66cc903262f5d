package hashicorp

import (
	"io"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/core"
)

// This file is the raft.BatchingFSM: committed entries applied to the
// core.StateMachine in log order, and its snapshots written and restored.

// fsm is the raft.BatchingFSM over a core.StateMachine. hashicorp/raft calls
// ApplyBatch, Apply, Snapshot and Restore from its one FSM goroutine;
// Persist runs concurrently with them (core snapshots are copy-on-write).
type fsm struct {
	n *Node
}

var _ raft.BatchingFSM = (*fsm)(nil)

// applyResponse is what the FSM returns for each entry: the ApplyFuture's Response.
type applyResponse struct {
	res core.Result
	err error
}

// ApplyBatch applies a batch of committed entries in log order: ticketd
// commands through core (then OnApply), configuration entries as Skip. After
// a fatal apply error nothing more is applied: every entry gets the error.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	if o := f.n.cfg.Observer; o != nil {
		defer func(start time.Time) { o.Applied(len(logs), time.Since(start)) }(time.Now())
	}
	out := make([]any, len(logs))
	// One array holds the batch's responses: one allocation per batch,
	// not one per entry (a follower's are never read: no future waits).
	resps := make([]applyResponse, len(logs))
	conf := false
	var entryBytes uint64
	for i, l := range logs {
		resps[i] = f.applyOne(l)
		out[i] = &resps[i]
		conf = conf || l.Type == raft.LogConfiguration
		entryBytes += uint64(len(l.Data))
	}
	if conf {
		// A committed configuration change: close the peer connections
		// of members it removed (peergate).
		f.n.gate.Refresh()
	}
	f.n.applied(entryBytes)
	return out
}

// Apply applies one entry (hashicorp calls it only for non-batching FSMs;
// kept for completeness).
func (f *fsm) Apply(l *raft.Log) any {
	r := f.applyOne(l)
	f.n.applied(uint64(len(l.Data)))
	return &r
}

// applyOne applies one committed entry and returns its response.
func (f *fsm) applyOne(l *raft.Log) applyResponse {
	n := f.n
	if err := n.fatalErr(); err != nil {
		return applyResponse{err: err}
	}
	if l.Type != raft.LogCommand {
		// Configuration changes carry no ticketd command (LogNoop and
		// LogBarrier never reach the FSM).
		n.sm.Skip(l.Index)
		return applyResponse{res: core.Result{Outcome: core.OutcomeNoop}}
	}
	prev := n.sm.AppliedIndex()
	cmd, res, err := n.sm.ApplyEntry(l.Index, l.Data)
	if err != nil {
		return applyResponse{err: n.fail(err)}
	}
	if l.Index > prev && n.cfg.OnApply != nil {
		n.cfg.OnApply(l.Index, cmd, res)
	}
	return applyResponse{res: res}
}

// Snapshot takes an O(1) copy-on-write snapshot of the state machine.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{snap: f.n.sm.Snapshot()}, nil
}

// Restore replaces the state machine with the snapshot in rc (core verifies it
// completely before changing anything), then calls OnRestore. hashicorp/raft
// calls it from the FSM goroutine for a snapshot installed from the leader,
// and from NewRaft for the local snapshot at start; either way before the
// next ApplyBatch. The snapshot's size, counted as it is read, is what the
// next snapshot waits for (snapshot.go).
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	cr := &countingReader{r: rc}
	if err := f.n.sm.Restore(cr); err != nil {
		return err
	}
	if fn := f.n.cfg.OnRestore; fn != nil {
		fn(f.n.sm.AppliedIndex())
	}
	f.n.restored(cr.n)
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n uint64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += uint64(k)
	return k, err
}

// fsmSnapshot writes a core snapshot into a raft snapshot sink.
type fsmSnapshot struct {
	snap *core.Snapshot
}

// Persist writes the deterministic core snapshot to sink and closes it, or
// cancels it on error.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.snap.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release does nothing: the copy-on-write tree is garbage once unreferenced.
func (s *fsmSnapshot) Release() {}
