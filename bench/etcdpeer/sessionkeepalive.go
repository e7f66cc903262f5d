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
// it (issue 33).
//
// Each worker opens one LeaseKeepAlive stream before the window and, per
// operation, sends one LeaseKeepAliveRequest and waits for its response.
// That is how etcd's own clients keep leases alive — clientv3's KeepAlive
// and concurrency.Session send every renewal as a message on one long-lived
// stream — and what etcd's leader serves cheapest: no stream set-up per
// renewal and no Raft entry (the lessor renews in memory unless lease
// checkpointing is on). clientv3's KeepAliveOnce would open and close a
// stream per renewal, work no etcd deployment does per keep-alive, so it
// would flatter ticketd; the stream is the stricter and fair baseline.
func measureSessionKeepAlive(ctx context.Context, cli *clientv3.Client, cfg load.Config, prefix string, keys int) (load.Result, error) {
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
