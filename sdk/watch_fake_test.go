package sdk_test

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// Watch is not served by the fake cluster: the SDK's Watch is tested
// against real nodes (watch_test.go, package ticketdtest).
func (n *fakeNode) Watch(context.Context, *ticketv1.WatchRequest, *connect.ServerStream[ticketv1.WatchEvent]) error {
	return connect.NewError(connect.CodeUnimplemented, errors.New("fake: no watch"))
}
