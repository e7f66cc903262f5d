package main

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/ticketd/ticketd/bench/handoff"
	"github.com/ticketd/ticketd/bench/load"
)

// measureHandoff runs cfg.Concurrency workers, each with a session of its
// own and a concurrency.Mutex on one shared prefix, in a loop of Lock then
// Unlock: the contended handoff workload. Holders are ordered by
// the time their Lock returned (the Mutex gives no token); see package
// handoff for the latency's definition.
func measureHandoff(ctx context.Context, cli *clientv3.Client, cfg load.Config) (load.Result, error) {
	sessions := make([]*concurrency.Session, cfg.Concurrency)
	mutexes := make([]*concurrency.Mutex, cfg.Concurrency)
	defer func() {
		for _, s := range sessions {
			if s != nil {
				closeSession(s)
			}
		}
	}()
	prefix := fmt.Sprintf("/ticketbench/handoff/c%d/", cfg.Concurrency)
	for i := range sessions {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(sessionTTL), concurrency.WithContext(ctx))
		if err != nil {
			return load.Result{}, fmt.Errorf("session %d: %w", i, err)
		}
		sessions[i] = s
		mutexes[i] = concurrency.NewMutex(s, prefix)
	}
	return handoff.Measure(ctx, cfg, func(ctx context.Context, w int) (handoff.Cycle, error) {
		m := mutexes[w]
		if err := m.Lock(ctx); err != nil {
			return handoff.Cycle{}, fmt.Errorf("lock: %w", err)
		}
		c := handoff.Cycle{Acquired: time.Now()}
		if err := m.Unlock(ctx); err != nil {
			return handoff.Cycle{}, fmt.Errorf("unlock: %w", err)
		}
		c.Released = time.Now()
		return c, nil
	})
}
