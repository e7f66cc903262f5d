//go:build faults

package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"

	"github.com/ticketd/ticketd/faults/history"
)

// client makes recorded calls to random nodes of the cluster, one at a time.
type client struct {
	id      int
	rec     *history.Recorder
	c       Cluster
	rng     *rand.Rand
	tag     string
	timeout time.Duration // per call, except waiting Acquires
}

// call records one call of op's kind to a random node: fn sends the request
// and fills op's outputs on success.
func (cl *client) call(op history.Op, timeout time.Duration, fn func(ctx context.Context, node int, op *history.Op) error) history.Op {
	op.Client, op.Node, op.Tag = cl.id, cl.rng.Intn(cl.c.Size()), cl.tag
	op.NodeID = cl.c.NodeID(op.Node)
	op = cl.rec.Invoke(op)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := fn(ctx, op.Node, &op)
	cancel()
	op.Outcome, op.Code = history.Classify(op.Kind, err)
	if op.Outcome != history.OK && op.Kind == history.Acquire {
		op.Token = 0
	}
	cl.rec.Complete(op)
	return op
}

func (cl *client) acquire(key, owner string, leaseMS int64, wait bool) history.Op {
	return cl.acquireAs(lockSpec{key: key}, owner, leaseMS, wait)
}

// lockSpec is what an Acquire asks for: a key, its mode, its
// semaphore limit (0: a lock) and the session to hold it under (0: none).
type lockSpec struct {
	key     string
	shared  bool
	limit   uint32
	session uint64
}

// acquireAs records an Acquire of spec. A LimitMismatch refusal records
// the key's limit (its detail) in KeyLimit.
func (cl *client) acquireAs(spec lockSpec, owner string, leaseMS int64, wait bool) history.Op {
	timeout := cl.timeout
	if wait {
		timeout = max(timeout, 2*time.Duration(leaseMS)*time.Millisecond)
	}
	op := history.Op{Kind: history.Acquire, Key: spec.key, Owner: owner, LeaseMS: leaseMS, Wait: wait,
		Shared: spec.shared, Limit: spec.limit, Session: spec.session}
	mode := ticketv1.Mode_MODE_EXCLUSIVE
	if spec.shared {
		mode = ticketv1.Mode_MODE_SHARED
	}
	return cl.call(op, timeout, func(ctx context.Context, node int, op *history.Op) error {
		res, err := cl.c.Lock(node).Acquire(ctx, &ticketv1.AcquireRequest{Key: spec.key, LeaseMs: leaseMS, Wait: wait, Owner: owner,
			Mode: mode, Limit: spec.limit, Session: spec.session})
		if err == nil {
			op.Token, op.ResLeaseMS = res.GetToken(), res.GetLeaseMs()
		}
		if lm := limitMismatch(err); lm != nil {
			op.KeyLimit = lm.GetLimit()
		}
		return err
	})
}

// limitMismatch returns the LimitMismatch detail of err, if it has one.
func limitMismatch(err error) *ticketv1.LimitMismatch {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if lm, ok := v.(*ticketv1.LimitMismatch); ok {
				return lm
			}
		}
	}
	return nil
}

func (cl *client) release(key string, token uint64) history.Op {
	op := history.Op{Kind: history.Release, Key: key, Token: token}
	return cl.call(op, cl.timeout, func(ctx context.Context, node int, _ *history.Op) error {
		_, err := cl.c.Lock(node).Release(ctx, &ticketv1.ReleaseRequest{Key: key, Token: token})
		return err
	})
}

func (cl *client) renew(key string, token uint64) history.Op {
	op := history.Op{Kind: history.Renew, Key: key, Token: token}
	return cl.call(op, cl.timeout, func(ctx context.Context, node int, op *history.Op) error {
		res, err := cl.c.Lock(node).Renew(ctx, &ticketv1.RenewRequest{Key: key, Token: token})
		if err == nil {
			op.ResLeaseMS = res.GetLeaseMs()
		}
		return err
	})
}

func (cl *client) get(key string) history.Op {
	op := history.Op{Kind: history.Get, Key: key}
	return cl.call(op, cl.timeout, func(ctx context.Context, node int, op *history.Op) error {
		res, err := cl.c.Lock(node).GetLock(ctx, &ticketv1.GetLockRequest{Key: key})
		if err == nil {
			op.Held, op.HolderToken, op.HolderOwner = res.GetHeld(), res.GetToken(), res.GetOwner()
			op.KeyShared, op.KeyLimit = res.GetMode() == ticketv1.Mode_MODE_SHARED, res.GetLimit()
			for _, h := range res.GetHolders() {
				op.Holders = append(op.Holders, history.Holder{Token: h.GetToken(), Owner: h.GetOwner(), Session: h.GetSession()})
			}
		}
		return err
	})
}

func (cl *client) checkToken(key string, token uint64) history.Op {
	op := history.Op{Kind: history.CheckToken, Key: key, Token: token}
	return cl.call(op, cl.timeout, func(ctx context.Context, node int, op *history.Op) error {
		res, err := cl.c.Lock(node).CheckToken(ctx, &ticketv1.CheckTokenRequest{Key: key, Token: token})
		if err == nil {
			op.Valid, op.HolderToken = res.GetValid(), res.GetCurrentToken()
			op.KeyShared, op.KeyLimit = res.GetMode() == ticketv1.Mode_MODE_SHARED, res.GetLimit()
		}
		return err
	})
}

// pause sleeps up to d at random, or until ctx ends.
func (cl *client) pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(cl.rng.Int63n(int64(d))))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// held is a lock a worker believes it holds.
type held struct {
	key   string
	token uint64
	// renewed is when its last acknowledged Acquire or Renew was called.
	renewed time.Time
}

// worker is one client of the hot-key workload: it takes a hot key, keeps it
// for a while (renewing, checking its token, reading), then releases it or
// dies without releasing; when it holds nothing it acquires (with or without
// waiting), reads, or checks a random token. Owners are fresh per
// acquisition; an Acquire with an unknown outcome is retried with the same
// owner, as the API asks, at most twice.
func (cl *client) worker(ctx context.Context, keys []string, leaseMS int64, lastToken func() uint64) {
	cl.lockWorker(ctx, func() lockSpec { return lockSpec{key: keys[cl.rng.Intn(len(keys))]} }, leaseMS, lastToken)
}

// lockWorker is worker over the keys and modes pick chooses
// (readers-writer keys, semaphores).
func (cl *client) lockWorker(ctx context.Context, pick func() lockSpec, leaseMS int64, lastToken func() uint64) {
	lease := time.Duration(leaseMS) * time.Millisecond
	var h *held
	seq := 0
	for ctx.Err() == nil {
		if h == nil {
			spec := pick()
			key := spec.key
			switch r := cl.rng.Float64(); {
			case r < 0.1:
				cl.get(key)
			case r < 0.15:
				cl.checkToken(key, 1+uint64(cl.rng.Int63n(int64(lastToken())+1)))
			default:
				seq++
				owner := fmt.Sprintf("c%d-%d", cl.id, seq)
				wait := cl.rng.Float64() < 0.25
				for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
					start := time.Now()
					op := cl.acquireAs(spec, owner, leaseMS, wait)
					if op.Outcome == history.OK {
						h = &held{key: key, token: op.Token, renewed: start}
					}
					if op.Outcome != history.Unknown {
						break
					}
				}
			}
			cl.pause(ctx, lease/20)
			continue
		}
		switch r := cl.rng.Float64(); {
		case time.Since(h.renewed) > lease/2 || r < 0.35:
			start := time.Now()
			op := cl.renew(h.key, h.token)
			switch op.Outcome {
			case history.OK:
				h.renewed = start
			case history.Fail:
				h = nil
			}
		case r < 0.5:
			op := cl.checkToken(h.key, h.token)
			if op.Outcome == history.OK && !op.Valid {
				h = nil
			}
		case r < 0.6:
			cl.get(h.key)
		case r < 0.9:
			cl.release(h.key, h.token)
			h = nil
		default:
			h = nil // the holder dies: no release, no renewal
		}
		cl.pause(ctx, lease/16)
	}
}

// prober keeps long-lease locks on its own keys through the faults, renewing
// them well within their lease and now and then releasing one and taking it
// again, so the final reads after restarting every node have acknowledged
// grants and releases to compare with (durability).
func (cl *client) prober(ctx context.Context, keys []string, leaseMS int64) {
	holds := map[string]uint64{}
	renewed := map[string]time.Time{}
	seq := 0
	for ctx.Err() == nil {
		for _, key := range keys {
			if ctx.Err() != nil {
				return
			}
			tok, ok := holds[key]
			switch {
			case !ok:
				seq++
				owner := fmt.Sprintf("p%d-%d", cl.id, seq)
				for attempt := 0; attempt < 3; attempt++ {
					start := time.Now()
					op := cl.acquire(key, owner, leaseMS, false)
					if op.Outcome == history.OK {
						holds[key], renewed[key] = op.Token, start
					}
					if op.Outcome != history.Unknown {
						break
					}
				}
			case cl.rng.Float64() < 0.1:
				cl.release(key, tok)
				delete(holds, key)
			case time.Since(renewed[key]) > time.Duration(leaseMS)*time.Millisecond/4:
				start := time.Now()
				op := cl.renew(key, tok)
				switch op.Outcome {
				case history.OK:
					renewed[key] = start
				case history.Fail:
					delete(holds, key)
				}
			}
		}
		cl.pause(ctx, 500*time.Millisecond)
	}
}
