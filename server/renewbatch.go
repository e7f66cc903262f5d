package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/ticketd/ticketd/core"
)

// This file writes the renewals that reach the leader together — session
// KeepAlives (one round of a session at a time, keepalivebatch.go) and lock
// Renews — into shared log entries. Every renewal stays a replicated
// command, committed and applied in log order on every node before it is
// answered (docs/design.md#leases): only the entry is shared, as group
// commit shares an fsync. Up to maxRenewalEntries renewal entries are in
// flight on their own (a renewal that finds room is proposed at once, as
// its own KeepAliveSession or Renew, so a lone client's path and its entry
// are what they always were); renewals that arrive while that many are in
// flight wait, and the ones that wait together are written as one
// core.RenewBatch when an entry in flight is answered (etcd's raft loop and
// hashicorp's leader loop batch proposals the same way, one dispatch while
// another is in flight). 64 sessions kept alive together then cost a few
// entries a round, not 64: a log entry costs every node its encoding,
// storage, replication and apply, which a shared entry pays once.
//
// A RenewBatch is a version 4 command, which a node of an older binary
// stops on; the leader writes one only while every member of the
// configuration is known to apply version 4 (commandversion.go). Until
// then each renewal is proposed at once as its own entry, as before
// renewals shared entries, and a round that waited is proposed renewal by
// renewal should the gate close before its turn.
//
// A renewal never takes the answer of an entry proposed before it arrived:
// it only ever joins a round that has not been proposed yet, so its lease is
// counted, on every node, from an apply after its client sent it
// (docs/semantics.md#leases-are-lower-bounds), as keepalivebatch.go explains.

// maxRenewalEntries is how many renewal entries the leader keeps in flight
// before renewals that arrive wait to share the next one.
const maxRenewalEntries = 4

// maxBatchRenewals bounds the renewals of one RenewBatch entry, and so its
// size (a lock renewal carries its key, up to core.MaxKeyBytes); renewals
// past it wait for the entry after.
const maxBatchRenewals = 256

// renewal is one session KeepAlive (session set) or lock Renew (key and
// token) on its way into the log.
type renewal struct {
	session uint64
	key     string
	token   uint64
}

// command is the renewal's entry of its own: KeepAliveSession or Renew.
func (r renewal) command() core.Command {
	if r.session != 0 {
		return core.KeepAliveSession(r.session)
	}
	return core.Renew(r.key, r.token)
}

// renewalRound is one renewal entry and the renewals it carries; res and
// errs (one Result and one error per renewal, in order; a nil error for a
// Result) are set before done is closed.
type renewalRound struct {
	items []renewal
	done  chan struct{}
	res   []core.Result
	errs  []error
}

func newRenewalRound(it renewal) *renewalRound {
	return &renewalRound{items: []renewal{it}, done: make(chan struct{})}
}

// renewalRounds holds this leader's renewal rounds: how many are in flight
// and those waiting for room, oldest first. The zero value is ready to use;
// it is safe for concurrent use.
type renewalRounds struct {
	mu       sync.Mutex
	inflight int
	waiting  []*renewalRound
	batched  uint64 // renewals written in a RenewBatch with others
}

// join returns start true when there is room in flight: the caller
// proposes renewal it alone at once and calls Node.nextRenewals when that
// returns. Otherwise it returns the round that carries it, waiting to be
// proposed when an entry in flight is answered, and its position there.
func (b *renewalRounds) join(it renewal) (r *renewalRound, pos int, start bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inflight < maxRenewalEntries && len(b.waiting) == 0 {
		b.inflight++
		return nil, 0, true
	}
	if k := len(b.waiting); k > 0 && len(b.waiting[k-1].items) < maxBatchRenewals {
		r = b.waiting[k-1]
		r.items = append(r.items, it)
		return r, len(r.items) - 1, false
	}
	r = newRenewalRound(it)
	b.waiting = append(b.waiting, r)
	return r, 0, false
}

// next is called when a round in flight has been answered: it returns the
// oldest waiting round, now in flight in its place (no renewal joins it any
// more), or nil, and then one round fewer is in flight.
func (b *renewalRounds) next() *renewalRound {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiting) == 0 {
		b.inflight--
		return nil
	}
	r := b.waiting[0]
	b.waiting[0] = nil
	b.waiting = b.waiting[1:]
	return r
}

// wrote counts k renewals proposed together in one RenewBatch entry.
func (b *renewalRounds) wrote(k int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batched += uint64(k)
}

// Waiting returns how many renewals wait for room to be proposed.
func (b *renewalRounds) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, r := range b.waiting {
		n += len(r.items)
	}
	return n
}

// Batched returns how many renewals this leader wrote in a RenewBatch
// entry shared with others.
func (b *renewalRounds) Batched() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.batched
}

// proposeRenewal writes renewal it into the log on the promoted leader, in
// an entry of its own or one shared with the renewals that arrived with it
// (see above), and returns its Result: what its KeepAliveSession or Renew
// gave when it applied here. A renewal that finds room in flight is
// proposed at once on the caller's goroutine with ctx, alone, as it always
// was. One that waits joins a round that is proposed detached from every
// caller (bounded by proposeTimeout and the node's life), so that a client
// that goes away fails no other renewal of its entry; ctx then bounds only
// this caller's wait.
//
// Errors: ErrOutcomeUnknown (a shared entry's proposal timed out inside the
// server), ctx's error, and the backend's Propose errors (not leader,
// stopped).
func (n *Node) proposeRenewal(ctx context.Context, it renewal) (core.Result, error) {
	if !n.versions.allows(core.CommandVersion4) {
		// Not every member is known to apply a RenewBatch: the renewal's
		// own entry, at once, as before renewals shared entries.
		return n.raft.Propose(ctx, it.command())
	}
	r, pos, start := n.lead.renewals.join(it)
	if start {
		res, err := n.raft.Propose(ctx, it.command())
		n.nextRenewals()
		return res, err
	}
	select {
	case <-r.done:
		if err := r.errs[pos]; err != nil {
			return core.Result{}, err
		}
		return r.res[pos], nil
	case <-ctx.Done():
		return core.Result{}, ctx.Err()
	}
}

// nextRenewals is called when a renewal entry in flight has been answered:
// the round that waited longest, if any, is proposed on a worker in its
// place, and the rounds after it follow one by one as each is answered.
func (n *Node) nextRenewals() {
	r := n.lead.renewals.next()
	if r == nil {
		return
	}
	n.bg.Add(1)
	n.http.Workers().Go(func() { // never blocks (httpapi/workerpool.go)
		defer n.bg.Done()
		n.proposeRound(r)
		close(r.done)
		n.nextRenewals()
	})
}

// proposeRound proposes the renewals of round r and sets its res and errs:
// in one entry (renewalEntry) while every member is known to apply a
// RenewBatch, else each renewal in an entry of its own, all at once. The
// gate is asked again here because a round fills while earlier entries
// are in flight, and a leadership change in between starts the cluster
// command version over (commandversion.go).
func (n *Node) proposeRound(r *renewalRound) {
	r.res, r.errs = make([]core.Result, len(r.items)), make([]error, len(r.items))
	if len(r.items) == 1 || n.versions.allows(core.CommandVersion4) {
		res, err := n.renewalEntry(r.items)
		for k := range r.items {
			if err != nil {
				r.errs[k] = err
			} else {
				r.res[k] = res[k]
			}
		}
		return
	}
	var wg sync.WaitGroup
	for k, it := range r.items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := n.renewalEntry([]renewal{it})
			if err != nil {
				r.errs[k] = err
				return
			}
			r.res[k] = res[0]
		}()
	}
	wg.Wait()
}

// renewalEntry proposes one entry for the renewals of a round, bounded by
// proposeTimeout and the node's life: one renewal's own command, or a
// core.RenewBatch of them all (sessions and locks each in the order of
// items), and returns each renewal's Result in the order of items. A batch
// only when the caller found every member to apply one (proposeRound).
func (n *Node) renewalEntry(items []renewal) ([]core.Result, error) {
	cmd := items[0].command()
	if len(items) > 1 {
		var sessions []uint64
		var locks []core.LockRef
		for _, it := range items {
			if it.session != 0 {
				sessions = append(sessions, it.session)
			} else {
				locks = append(locks, core.LockRef{Key: it.key, Token: it.token})
			}
		}
		cmd = core.RenewBatch(sessions, locks)
		n.lead.renewals.wrote(len(items))
	}
	pctx := n.detached()
	res, err := n.raft.Propose(pctx, cmd)
	if err != nil {
		if pctx.Err() != nil && n.life.Err() == nil {
			return nil, fmt.Errorf("%w: %s of %d renewals: %v", ErrOutcomeUnknown, cmd.Op, len(items), err)
		}
		return nil, err
	}
	out := make([]core.Result, len(items))
	if len(items) == 1 {
		out[0] = res
		return out, nil
	}
	if res.Batch == nil || len(res.Batch.Sessions)+len(res.Batch.Locks) != len(items) {
		return nil, fmt.Errorf("renew batch of %d renewals: unexpected result %s", len(items), res.Outcome)
	}
	s, l := 0, 0
	for k, it := range items {
		if it.session != 0 {
			out[k], s = res.Batch.Sessions[s], s+1
		} else {
			out[k], l = res.Batch.Locks[l], l+1
		}
	}
	return out, nil
}
