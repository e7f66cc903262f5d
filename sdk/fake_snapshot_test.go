package sdk_test

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// Snapshot is not served by the fake cluster (the SDK has no backup API).
func (n *fakeNode) Snapshot(context.Context, *ticketv1.SnapshotRequest, *connect.ServerStream[ticketv1.SnapshotChunk]) error {
	return connect.NewError(connect.CodeUnimplemented, errors.New("fake: snapshot not served"))
}
