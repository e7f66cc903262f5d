package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

func TestBearerTokenAndAuthErrors(t *testing.T) {
	c := newFakeCluster(t, 1)
	c.setHook(func(ctx context.Context, method string, req any) error {
		ci, ok := connect.CallInfoForHandlerContext(ctx)
		if !ok || ci.RequestHeader().Get("Authorization") != "Bearer s3cret" {
			return connect.NewError(connect.CodeUnauthenticated, errors.New("no token"))
		}
		if method == "Release" {
			return connect.NewError(connect.CodePermissionDenied, errors.New("not yours"))
		}
		return nil
	})
	ctx := testCtx(t)

	anon := newClient(t, c.endpoints())
	_, err := anon.Acquire(ctx, "k", time.Second)
	require.ErrorIs(t, err, sdk.ErrUnauthenticated)

	wrong := newClient(t, c.endpoints(), sdk.WithBearerToken("guess"))
	_, err = wrong.Acquire(ctx, "k2", time.Second)
	require.ErrorIs(t, err, sdk.ErrUnauthenticated)

	cl := newClient(t, c.endpoints(), sdk.WithBearerToken("s3cret"))
	g, err := cl.Acquire(ctx, "k3", time.Second)
	require.NoError(t, err)
	err = cl.Release(ctx, "k3", g.Token)
	require.ErrorIs(t, err, sdk.ErrPermissionDenied)
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
}

// refusingCluster answers every Status with Unauthenticated.
type refusingCluster struct {
	ticketv1connect.UnimplementedClusterServiceHandler
}

func (refusingCluster) Status(context.Context, *ticketv1.StatusRequest) (*ticketv1.StatusResponse, error) {
	return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("no credential"))
}

// TestAuthRefusalIsFinal: a refused credential is not retried until the
// deadline (every node would refuse it): Status and Acquire return at once.
func TestAuthRefusalIsFinal(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewClusterServiceHandler(refusingCluster{}))
	srv := sdk.NewH2CServer(mux)
	t.Cleanup(srv.Close)
	cl := newClient(t, []string{srv.Listener.Addr().String()})
	_, err := cl.Status(testCtx(t))
	require.ErrorIs(t, err, sdk.ErrUnauthenticated)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	_, err = cl.Acquire(testCtx(t), "k", time.Second)
	require.ErrorIs(t, err, sdk.ErrUnauthenticated)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
}
