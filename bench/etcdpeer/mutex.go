package main

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/ticketd/ticketd/bench/load"
)

// sessionTTL is each worker's lease TTL in seconds; the session keeps it alive.
const sessionTTL = 10

// measure runs cfg.Concurrency workers, each locking and unlocking its own
// concurrency.Mutex, and returns the load figures of the Lock+Unlock cycles.
func measure(ctx context.Context, cli *clientv3.Client, cfg load.Config) (load.Result, error) {
	sessions := make([]*concurrency.Session, cfg.Concurrency)
	mutexes := make([]*concurrency.Mutex, cfg.Concurrency)
	defer func() {
		for _, s := range sessions {
			if s != nil {
				closeSession(s)
			}
		}
	}()
	for i := range sessions {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(sessionTTL), concurrency.WithContext(ctx))
		if err != nil {
			return load.Result{}, fmt.Errorf("session %d: %w", i, err)
		}
		sessions[i] = s
		mutexes[i] = concurrency.NewMutex(s, fmt.Sprintf("/ticketbench/lock/w%d/", i))
	}
	return load.Run(ctx, cfg, func(ctx context.Context, w int) error {
		m := mutexes[w]
		if err := m.Lock(ctx); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if err := m.Unlock(ctx); err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
		return nil
	})
}

// closeSession revokes the session's lease without waiting long for it.
func closeSession(s *concurrency.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.Orphan()
	_, _ = s.Client().Revoke(ctx, s.Lease())
}
