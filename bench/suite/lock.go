package suite

import (
	"context"

	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"

	"github.com/ticketd/ticketd/bench/apicluster"
)

// lockCluster is a three-node ticketd cluster serving the Connect API.
type lockCluster interface {
	// Client returns a LockService client of the leader.
	Client() ticketv1connect.LockServiceClient
	Close() error
}

// startLockCluster starts an in-process ticketd cluster on backend with its
// data in dir.
func startLockCluster(ctx context.Context, backend, dir string) (lockCluster, error) {
	c, err := apicluster.Start(ctx, apicluster.Config{Backend: backend, Dir: dir})
	if err != nil {
		return nil, err
	}
	return c, nil
}
