package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ticketd/ticketd/bench/load"
)

// measureSessionKeepAlive runs cfg.Concurrency workers, each keeping alive a
// lease of its own (TTL sessionTTL) with keys keys attached ("/ticketbench/
// keepalive/<prefix>/w<i>/k<j>", put before the measurement): the peer of
// ticketd's session KeepAlive, which renews a session and every lock under
// it in one call (docs/design.md#sessions).
//
// With stream true (what ticketbench's keepalive workload runs), each
// worker opens one LeaseKeepAlive stream before the window and each
// operation is one request and its response on it: how clientv3's KeepAlive
// and concurrency.Session renew in production, and etcd's cheapest path (no
// stream set-up per renewal). It is the like-for-like bar for ticketd's
// SDK, which sends each session keep-alive as a message on a
// KeepAliveStream kept open per session; the figures compare what the
// servers do per renewal (etcd's leader renews in memory, ticketd commits
// a Raft entry).
//
// With stream false (-workload session-keepalive, by hand), each operation
// is one clientv3 KeepAliveOnce: one LeaseKeepAlive stream per renewal, the
// peer of one unary ticketd KeepAlive per renewal.
func measureSessionKeepAlive(ctx context.Context, cli *clientv3.Client, cfg load.Config, prefix string, keys int, stream bool) (load.Result, error) {
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
		for j := range keys {
			key := fmt.Sprintf("/ticketbench/keepalive/%s/w%d/k%d", prefix, i, j)
			if _, err := cli.Put(ctx, key, "", clientv3.WithLease(g.ID)); err != nil {
				return load.Result{}, fmt.Errorf("put %s: %w", key, err)
			}
		}
	}
	if !stream {
		return load.Run(ctx, cfg, func(ctx context.Context, w int) error {
			resp, err := cli.KeepAliveOnce(ctx, leases[w])
			if err != nil {
				return fmt.Errorf("keep-alive: %w", err)
			}
			if resp.TTL <= 0 {
				return errors.New("keep-alive: lease not found")
			}
			return nil
		})
	}
	// The streams live as long as the measurement, not one operation.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lc := pb.NewLeaseClient(cli.ActiveConnection())
	streams := make([]pb.Lease_LeaseKeepAliveClient, len(leases))
	for i := range streams {
		st, err := lc.LeaseKeepAlive(sctx)
		if err != nil {
			return load.Result{}, fmt.Errorf("keep-alive stream %d: %w", i, err)
		}
		streams[i] = st
	}
	return load.Run(ctx, cfg, func(ctx context.Context, w int) error {
		st := streams[w]
		if err := st.Send(&pb.LeaseKeepAliveRequest{ID: int64(leases[w])}); err != nil {
			return fmt.Errorf("keep-alive send: %w", err)
		}
		resp, err := st.Recv()
		if err != nil {
			return fmt.Errorf("keep-alive receive: %w", err)
		}
		if resp.TTL <= 0 {
			return errors.New("keep-alive: lease not found")
		}
		return nil
	})
}
