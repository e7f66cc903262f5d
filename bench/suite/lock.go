package suite

import (
	"context"

	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"

	"github.com/ticketd/ticketd/bench/apicluster"
)

// lockCluster is a three-node ticketd cluster serving the Connect API.
type lockCluster interface {
	// Client returns a LockService client of the leader.
	Client() ticketv1connect.LockServiceClient
	// CurrentLeaderURL returns the API base URL of the node leading now,
	// for clients in another process.
	CurrentLeaderURL(ctx context.Context) (string, error)
	// Term returns the Raft term the cluster reports (elections counting).
	Term(ctx context.Context) (uint64, error)
	Close() error
}

// startLockCluster starts an in-process ticketd cluster on backend with its
// data in dir and the Raft timing of t.
func startLockCluster(ctx context.Context, backend, dir string, t Timing) (lockCluster, error) {
	c, err := apicluster.Start(ctx, apicluster.Config{Backend: backend, Dir: dir, Tune: func(nc *config.Config) {
		nc.Raft.ElectionTimeoutMS, nc.Raft.HeartbeatMS = t.ElectionTimeout.Milliseconds(), t.HeartbeatInterval.Milliseconds()
	}})
	if err != nil {
		return nil, err
	}
	return c, nil
}
