package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/ticketd/ticketd/core"
)

// This file merges concurrent KeepAlives of one session on the leader
// (unmerged, a client with 16 connections on one session writes every
// KeepAlive as its own entry, 700–1600 entries a second, and slows every
// other client). At most one KeepAliveSession entry of a
// session is in flight at a time; every KeepAlive admitted while one is in
// flight waits for it to finish and then shares the next one, which is
// proposed once for all of them.
//
// A KeepAlive never takes the answer of an entry proposed before it arrived.
// That entry may already have committed, and a follower applied it and
// started the session's new deadline from its own apply, before this
// KeepAlive's client sent its request; answering it would let the client
// count its lease from a moment after the one the cluster counts from, and
// the lease would end before the client's own deadline
// (docs/semantics.md#leases-are-lower-bounds: a lease is a lower bound).
// Requests that arrive during a round wait for the next round, as batched
// ReadIndex requests do (etcd's linearizable read loop, dgraph's
// RunReadIndexLoop). So a session sees at most one entry per commit round
// however many KeepAlives its clients send, and each KeepAlive waits at most
// the rest of one round and one more. The entry a round writes may carry
// the renewals of other sessions and locks too (renewbatch.go).

// keepAliveBatches holds the KeepAlive rounds of the sessions that have one
// in flight on this leader. The zero value is ready to use; it is safe for
// concurrent use.
type keepAliveBatches struct {
	mu       sync.Mutex
	sessions map[uint64]*keepAliveRound // the round waiting to be proposed after the one in flight; nil when none
	merged   uint64                     // KeepAlives answered by a round another one started
}

// keepAliveRound is one KeepAliveSession proposal and the KeepAlives it
// answers. ttlMS and err are set before done is closed.
type keepAliveRound struct {
	done  chan struct{}
	ttlMS int64
	err   error
}

// join returns the round that answers a KeepAlive of session id arriving
// now: a new round, proposed at once by start (called with b.mu held; it
// must not block), when none of id is in flight; else the round after the
// one in flight, shared by every KeepAlive that arrives until that one is
// done.
func (b *keepAliveBatches) join(id uint64, start func(*keepAliveRound)) *keepAliveRound {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sessions == nil {
		b.sessions = map[uint64]*keepAliveRound{}
	}
	next, busy := b.sessions[id]
	switch {
	case !busy:
		r := &keepAliveRound{done: make(chan struct{})}
		b.sessions[id] = nil
		start(r)
		return r
	case next == nil:
		next = &keepAliveRound{done: make(chan struct{})}
		b.sessions[id] = next
	default:
		b.merged++
	}
	return next
}

// advance is called when the round in flight for session id is done: it
// returns the round that waited behind it, now in flight, or nil (and id has
// no round in flight any more).
func (b *keepAliveBatches) advance(id uint64) *keepAliveRound {
	b.mu.Lock()
	defer b.mu.Unlock()
	next := b.sessions[id]
	if next == nil {
		delete(b.sessions, id)
		return nil
	}
	b.sessions[id] = nil
	return next
}

// Merged returns how many KeepAlives were answered by a round that another
// KeepAlive of the same session had already joined (they wrote no entry of
// their own).
func (b *keepAliveBatches) Merged() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.merged
}

// proposeKeepAlive proposes core.KeepAliveSession(id) on the promoted
// leader, merged with the concurrent KeepAlives of id (see above), and
// returns the session's TTL in milliseconds. The caller has admitted the
// KeepAlive (lessor.SessionRenewable, the caller's principal). The proposal
// is detached from ctx, so that a client that goes away does not fail the
// others of its round; ctx bounds only this caller's wait.
//
// Errors: *SessionNotFoundError (the session ended before the entry
// applied), ErrOutcomeUnknown (the proposal timed out inside the server),
// ctx's error, and the backend's Propose errors (not leader, stopped).
func (n *Node) proposeKeepAlive(ctx context.Context, id uint64) (int64, error) {
	r := n.lead.keepAlives.join(id, func(first *keepAliveRound) {
		n.bg.Add(1)
		n.http.Workers().Go(func() { n.runKeepAlives(id, first) }) // never blocks (httpapi/workerpool.go)
	})
	select {
	case <-r.done:
		return r.ttlMS, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// runKeepAlives proposes round r of session id, answers it, and goes on with
// the rounds that queue behind it until none is left.
func (n *Node) runKeepAlives(id uint64, r *keepAliveRound) {
	defer n.bg.Done()
	for ; r != nil; r = n.lead.keepAlives.advance(id) {
		r.ttlMS, r.err = n.keepAliveEntry(id)
		close(r.done)
	}
}

// keepAliveEntry writes one KeepAliveSession of session id into the log,
// in an entry of its own or shared with other renewals (renewbatch.go),
// bounded by proposeTimeout and the node's life (Node.detached).
func (n *Node) keepAliveEntry(id uint64) (int64, error) {
	pctx := n.detached()
	res, err := n.proposeRenewal(pctx, renewal{session: id})
	if err != nil {
		if pctx.Err() != nil && n.life.Err() == nil {
			return 0, fmt.Errorf("%w: keep-alive of session %d: %v", ErrOutcomeUnknown, id, err)
		}
		return 0, err
	}
	if res.Outcome != core.OutcomeRenewed {
		return 0, &SessionNotFoundError{Session: id}
	}
	return res.LeaseMS, nil
}
