package scale

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ticketd/ticketd/sdk"

	"github.com/ticketd/ticketd/bench/latency"
)

// callTimeout bounds one SDK call of the fill, the renewals and the
// probes, retries included: long enough to ride out an election.
const callTimeout = 30 * time.Second

// lockKey is the key of the i-th filled lock.
func lockKey(i int) string { return fmt.Sprintf("scale/lock/%08d", i) }

// parallel runs op(i) for every i in [from, to) on workers goroutines, each
// taking the next i, and returns how long it took and the first error
// (after which the workers stop taking work).
func parallel(ctx context.Context, workers, from, to int, op func(ctx context.Context, i int) error) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	next.Store(int64(from))
	start := time.Now()
	for range min(workers, max(to-from, 0)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := op(ctx, i); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return took, firstErr
}

// call runs fn with a ctx bounded by callTimeout.
func call(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return fn(ctx)
}

// fill acquires the locks [from, to) (keys lockKey(i), lease cfg.Lease)
// from cfg.Clients concurrent workers through the SDK and keeps their
// tokens for renew. It returns how long the fill took.
func (s *scaler) fill(ctx context.Context, from, to int) (time.Duration, error) {
	s.tokens = append(s.tokens, make([]uint64, to-from)...)
	client := s.c.Client()
	return parallel(ctx, s.cfg.Clients, from, to, func(ctx context.Context, i int) error {
		return call(ctx, func(ctx context.Context) error {
			g, err := client.Acquire(ctx, lockKey(i), s.cfg.Lease)
			if err != nil {
				return fmt.Errorf("acquire %s: %w", lockKey(i), err)
			}
			s.tokens[i] = g.Token
			return nil
		})
	})
}

// fillSessions opens cfg.Sessions sessions (lease cfg.Lease) and acquires
// cfg.SessionLocks locks under each, the sessions taken in turn by
// cfg.Clients workers. The sessions stay open until the cluster stops (the
// SDK keeps them alive). It returns how long the locks took, the sessions'
// creation included.
func (s *scaler) fillSessions(ctx context.Context) (time.Duration, error) {
	client := s.c.Client()
	return parallel(ctx, s.cfg.Clients, 0, s.cfg.Sessions, func(ctx context.Context, j int) error {
		var sess *sdk.Session
		if err := call(ctx, func(ctx context.Context) (err error) {
			sess, err = client.CreateSession(ctx, s.cfg.Lease)
			return err
		}); err != nil {
			return fmt.Errorf("session %d: %w", j, err)
		}
		for k := range s.cfg.SessionLocks {
			key := fmt.Sprintf("scale/session/%06d/%04d", j, k)
			if err := call(ctx, func(ctx context.Context) error {
				_, err := client.Acquire(ctx, key, 0, sdk.WithSession(sess))
				return err
			}); err != nil {
				return fmt.Errorf("acquire %s under session %d: %w", key, sess.ID(), err)
			}
		}
		return nil
	})
}

// renew renews n held locks, taking the filled locks in turn, from
// cfg.Clients concurrent workers: the steady write load whose log the
// snapshots must keep compacting.
func (s *scaler) renew(ctx context.Context, n int) error {
	client := s.c.Client()
	took, err := parallel(ctx, s.cfg.Clients, 0, n, func(ctx context.Context, i int) error {
		j := i % len(s.tokens)
		return call(ctx, func(ctx context.Context) error {
			if _, err := client.Renew(ctx, lockKey(j), s.tokens[j]); err != nil {
				return fmt.Errorf("renew %s token %d: %w", lockKey(j), s.tokens[j], err)
			}
			return nil
		})
	})
	s.cfg.logf("%s: %d renewals in %v", s.cfg.Backend, n, took.Round(time.Millisecond))
	return err
}

// acquireLatency times cfg.ProbeOps Acquires of fresh keys by one client,
// releasing each (untimed), on a table of locks locks.
func (s *scaler) acquireLatency(ctx context.Context, locks int) (latency.Summary, error) {
	client := s.c.Client()
	h := latency.New()
	for i := range s.cfg.ProbeOps {
		key := fmt.Sprintf("scale/probe/%d/%d", locks, i)
		err := call(ctx, func(ctx context.Context) error {
			start := time.Now()
			g, err := client.Acquire(ctx, key, time.Minute)
			if err != nil {
				return fmt.Errorf("acquire %s: %w", key, err)
			}
			h.Record(time.Since(start))
			return client.Release(ctx, g.Key, g.Token)
		})
		if err != nil {
			return latency.Summary{}, err
		}
	}
	return h.Summarize(), nil
}
