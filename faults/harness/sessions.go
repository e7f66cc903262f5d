//go:build faults

package harness

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"

	"github.com/ticketd/ticketd/faults/history"
)

// The session calls (docs/design.md#sessions). Their ops have no key: the checkers bound
// the lives of a session's holders by them (check.LeaseSafety, the model).

func (cl *client) createSession(ttlMS int64) history.Op {
	op := history.Op{Kind: history.CreateSession, LeaseMS: ttlMS}
	return cl.call(op, cl.timeout, func(ctx context.Context, node int, op *history.Op) error {
		res, err := cl.c.Lock(node).CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: ttlMS})
		if err == nil {
			op.Session, op.ResLeaseMS = res.GetSession(), res.GetTtlMs()
		}
		return err
	})
}

func (cl *client) keepAlive(session uint64) history.Op {
	op := history.Op{Kind: history.KeepAlive, Session: session}
	return cl.call(op, cl.timeout, func(ctx context.Context, node int, op *history.Op) error {
		res, err := cl.c.Lock(node).KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: session})
		if err == nil {
			op.ResLeaseMS = res.GetTtlMs()
		}
		return err
	})
}

func (cl *client) closeSession(session uint64) history.Op {
	op := history.Op{Kind: history.CloseSession, Session: session}
	return cl.call(op, cl.timeout, func(ctx context.Context, node int, _ *history.Op) error {
		_, err := cl.c.Lock(node).CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: session})
		return err
	})
}

// sessionWorker is one client of the session workload (etcd leases, Consul
// sessions): it opens a session of ttlMS, acquires two or three of keys
// under it (waiting for some), keeps the session alive for a while (now
// and then checking a token or releasing one lock on its own), then closes
// the session or abandons it to expire. An Acquire with an unknown outcome
// is retried with the same owner, at most twice; a KeepAlive refused
// NotFound means the session ended (its locks with it).
func (cl *client) sessionWorker(ctx context.Context, keys []string, ttlMS int64) {
	ttl := time.Duration(ttlMS) * time.Millisecond
	seq := 0
	for ctx.Err() == nil {
		cr := cl.createSession(ttlMS)
		if cr.Code == connect.CodeUnimplemented.String() {
			return // a server without sessions: the workload has nothing to do
		}
		if cr.Outcome != history.OK {
			cl.pause(ctx, ttl/4)
			continue
		}
		s := cr.Session
		alive := time.Now()
		held := map[string]uint64{}
		for _, i := range cl.rng.Perm(len(keys))[:2+cl.rng.Intn(2)] {
			if ctx.Err() != nil || time.Since(alive) > ttl/2 {
				break
			}
			seq++
			owner := fmt.Sprintf("s%d-%d", cl.id, seq)
			wait := cl.rng.Float64() < 0.3
			for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
				// lease_ms is ignored under a session; giving the TTL sets
				// how long a waiting Acquire may wait.
				op := cl.acquireAs(lockSpec{key: keys[i], session: s}, owner, ttlMS, wait)
				if op.Outcome == history.OK {
					held[keys[i]] = op.Token
				}
				if op.Outcome != history.Unknown {
					break
				}
			}
		}
		ended := false
		for round := 2 + cl.rng.Intn(6); round > 0 && ctx.Err() == nil && !ended; round-- {
			cl.pause(ctx, ttl/6)
			start := time.Now()
			if op := cl.keepAlive(s); op.Outcome == history.OK {
				alive = start
			} else if op.Outcome == history.Fail {
				ended = true
				break
			}
			if len(held) == 0 {
				continue
			}
			key := keys[cl.rng.Intn(len(keys))]
			tok, ok := held[key]
			switch r := cl.rng.Float64(); {
			case !ok:
			case r < 0.4:
				cl.checkToken(key, tok)
			case r < 0.5:
				cl.release(key, tok)
				delete(held, key)
			}
		}
		if ended || ctx.Err() != nil {
			continue // the session ended, or the holder dies with the run
		}
		if cl.rng.Float64() < 0.6 {
			cl.closeSession(s)
		}
		// else: abandoned; its lease runs out and ends its locks.
	}
}
