package main

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ticketd/ticketd/bench/load"
)

// measureKeepAlive runs cfg.Concurrency workers, each renewing a lease of its
// own (granted before the measurement, TTL sessionTTL) with one
// KeepAliveOnce per operation: etcd's LeaseKeepAlive, which the leader
// answers from its own lessor without a Raft entry (unless lease
// checkpointing is on). It is the peer of ticketd's replicated Renew.
func measureKeepAlive(ctx context.Context, cli *clientv3.Client, cfg load.Config) (load.Result, error) {
	leases := make([]clientv3.LeaseID, cfg.Concurrency)
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, id := range leases {
			if id != 0 {
				_, _ = cli.Revoke(rctx, id)
			}
		}
	}()
	for i := range leases {
		g, err := cli.Grant(ctx, sessionTTL)
		if err != nil {
			return load.Result{}, fmt.Errorf("lease %d: %w", i, err)
		}
		leases[i] = g.ID
	}
	return load.Run(ctx, cfg, func(ctx context.Context, w int) error {
		if _, err := cli.KeepAliveOnce(ctx, leases[w]); err != nil {
			return fmt.Errorf("keep-alive: %w", err)
		}
		return nil
	})
}
