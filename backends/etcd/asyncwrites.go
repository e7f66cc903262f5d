package etcd

import (
	"fmt"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// This file is the loop's side of etcd raft's AsyncStorageWrites
// (Config.AsyncStorageWrites; etcd raft doc.go, "Usage with Asynchronous
// Storage Writes"): raft hands the log writes to a local append thread as
// MsgStorageAppend messages and the entries to apply to a local apply
// thread as MsgStorageApply messages, each carrying the responses to
// deliver once the write is done. The append thread is appendThread's
// goroutine, which owns every write of the log store and of the
// watermark's end of log; the apply thread is the loop itself (applying is
// in memory and must stay in log order with the proposers' wake-ups).
//
// Safety is raft's: a MsgStorageAppend's responses (the node's own
// MsgStorageAppendResp, its MsgAppResp and vote answers to peers) are
// delivered only after its Save returned, so an entry counts towards a
// commit only once durable on its voter, and raft hands an entry to apply
// only once it is durable here (Raft thesis §10.2.1: the leader sends
// MsgApp before its own append is durable; it just does not count itself
// until it is).

// appendThread is the append thread: a queue of MsgStorageAppend messages
// in raft's order, a goroutine that saves them, and the results waiting
// for the loop. Neither side ever blocks on the other: the loop only
// queues, the writer only records results and wakes the loop.
type appendThread struct {
	mu      sync.Mutex
	queue   []*pb.Message // MsgStorageAppend, in raft's order
	results []appendResult

	wake    chan struct{} // capacity 1: the queue has messages
	resultc chan struct{} // capacity 1: results are waiting for the loop
	wg      sync.WaitGroup
}

// appendResult is one Save of the writer: the messages it made durable, in
// order, or the error that stops the node.
type appendResult struct {
	msgs []*pb.Message
	err  error
}

func newAppendThread() *appendThread {
	return &appendThread{wake: make(chan struct{}, 1), resultc: make(chan struct{}, 1)}
}

// push queues m for the writer (loop side).
func (w *appendThread) push(m *pb.Message) {
	w.mu.Lock()
	w.queue = append(w.queue, m)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// takeQueue returns and empties the queue (writer side).
func (w *appendThread) takeQueue() []*pb.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue
	w.queue = nil
	return q
}

// done records a result and wakes the loop (writer side).
func (w *appendThread) done(r appendResult) {
	w.mu.Lock()
	w.results = append(w.results, r)
	w.mu.Unlock()
	select {
	case w.resultc <- struct{}{}:
	default:
	}
}

// takeResults returns and empties the results (loop side).
func (w *appendThread) takeResults() []appendResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.results
	w.results = nil
	return r
}

// appendedc is the channel the loop waits on for the writer's results; nil
// (never ready) without AsyncStorageWrites.
func (n *Node) appendedc() <-chan struct{} {
	if n.writer == nil {
		return nil
	}
	return n.writer.resultc
}

// startWriter starts the append thread when Config.AsyncStorageWrites is
// set; it stops once the loop has exited (n.done), after the Save under
// way, and closeResources waits for it before closing the store.
func (n *Node) startWriter() {
	if !n.cfg.AsyncStorageWrites {
		return
	}
	n.writer = newAppendThread()
	n.appliedMark.Store(n.applied)
	n.writer.wg.Add(1)
	go n.runWriter()
}

// runWriter is the append thread. It takes every message queued since its
// last Save and makes runs of them durable in one Save each — the entries
// of consecutive messages spliced as raft would (a later message's entries
// replace the earlier ones' from their first index), the newest HardState
// — so appends that queued behind a sync share the next one. A message
// carrying a snapshot is saved alone. A failed Save is reported and ends
// the thread: the loop stops the node.
func (n *Node) runWriter() {
	w := n.writer
	defer w.wg.Done()
	defer func() {
		if r := recover(); r != nil {
			w.done(appendResult{err: fmt.Errorf("etcd: append thread panic: %v", r)})
		}
	}()
	for {
		select {
		case <-n.done:
			return
		default:
		}
		select {
		case <-n.done:
			return
		case <-w.wake:
		}
		msgs := w.takeQueue()
		for len(msgs) > 0 {
			k := 1
			if raft.IsEmptySnap(msgs[0].GetSnapshot()) {
				for k < len(msgs) && raft.IsEmptySnap(msgs[k].GetSnapshot()) {
					k++
				}
			}
			err := n.saveAppends(msgs[:k])
			w.done(appendResult{msgs: msgs[:k], err: err})
			if err != nil {
				return
			}
			msgs = msgs[k:]
		}
	}
}

// saveAppends makes the writes of msgs (MsgStorageAppend, in raft's order;
// a snapshot only in a lone message) durable in one Save, lowering the
// watermark first when the entries overwrite a suffix of the log and
// raising it after (watermark.go). Errors are the store's and the
// watermark's; the node must stop.
func (n *Node) saveAppends(msgs []*pb.Message) error {
	var (
		hs   *pb.HardState
		ents []*pb.Entry
		snap *pb.Snapshot
	)
	for _, m := range msgs {
		// Term, Vote and Commit are all set when the HardState changed, all
		// unset otherwise (raftpb.Message).
		if m.Term != nil {
			hs = &pb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}
		}
		if s := m.GetSnapshot(); !raft.IsEmptySnap(s) {
			snap = s
		}
		ents = spliceEntries(ents, m.GetEntries())
	}
	if err := n.lowerWatermark(ents); err != nil {
		return err
	}
	start := time.Now()
	if err := n.store.Save(hs, ents, snap); err != nil {
		return fmt.Errorf("etcd: save: %w", err)
	}
	if len(ents) > 0 || snap != nil {
		if err := n.raiseWatermark(n.appliedMark.Load()); err != nil {
			return err
		}
		if n.cfg.Observer != nil && len(ents) > 0 {
			n.cfg.Observer.LogAppended(len(ents), time.Since(start))
		}
	}
	return nil
}

// spliceEntries returns acc followed by next, where next's entries replace
// acc's from next's first index on (a follower's log overwritten by a new
// leader between two appends). raft's slices are never written: a splice
// always copies.
func spliceEntries(acc, next []*pb.Entry) []*pb.Entry {
	if len(next) == 0 {
		return acc
	}
	if len(acc) == 0 {
		return next
	}
	keep := uint64(0)
	if first, base := next[0].GetIndex(), acc[0].GetIndex(); first > base {
		keep = min(first-base, uint64(len(acc)))
	}
	return append(acc[:keep:keep], next...)
}

// handleReadyAsync handles one Ready under AsyncStorageWrites: the Ready is
// accepted as it is read, messages to peers leave at once, the log writes
// go to the append thread, and the committed entries (all durable here
// already) are applied on the loop before their MsgStorageApplyResp is
// stepped.
func (n *Node) handleReadyAsync() error {
	rd := n.rn.Ready()
	if rd.SoftState != nil {
		n.onSoftState(rd.SoftState)
	}
	if rd.HardState != nil {
		n.hs = rd.HardState
	}
	n.noteConfProposal(rd.Entries)
	var applies []*pb.Message
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			n.writer.push(m)
		case raft.LocalApplyThread:
			applies = append(applies, m)
		default:
			n.send(m)
		}
	}
	for _, m := range applies {
		if err := n.applyEntries(m.GetEntries()); err != nil {
			return err
		}
		n.appliedMark.Store(n.applied)
		n.deliverLocal(m.GetResponses())
	}
	for _, rs := range rd.ReadStates {
		n.onReadState(rs)
	}
	n.reportFailedSends()
	n.releaseReads()
	if err := n.maybeSnapshot(); err != nil {
		return err
	}
	n.publish()
	return nil
}

// onAppended takes the append thread's results on the loop: a saved
// snapshot is restored into the state machine first (raft hands no entry
// after it to apply until it has heard that the snapshot is stored), then
// each message's responses are delivered. A failed Save stops the node.
func (n *Node) onAppended() error {
	for _, r := range n.writer.takeResults() {
		if r.err != nil {
			return r.err
		}
		for _, m := range r.msgs {
			if s := m.GetSnapshot(); !raft.IsEmptySnap(s) {
				if err := n.applySnapshot(s); err != nil {
					return err
				}
				n.appliedMark.Store(n.applied)
			}
			n.deliverLocal(m.GetResponses())
		}
	}
	n.reportFailedSends()
	n.publish()
	return nil
}

// deliverLocal delivers the responses of a local storage message: those
// addressed to this node are stepped, the others sent.
func (n *Node) deliverLocal(resps []*pb.Message) {
	for _, m := range resps {
		if m.GetTo() != n.id {
			n.send(m)
			continue
		}
		if err := n.rn.Step(m); err != nil {
			n.log.Debug("step local", zap.Stringer("type", m.GetType()), zap.Error(err))
		}
	}
}
