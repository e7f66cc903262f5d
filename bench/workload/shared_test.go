package workload_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"

	"github.com/ticketd/ticketd/bench/workload"
	"github.com/ticketd/ticketd/core"
)

// modeServer serves Acquire (not waiting: a refused grant is an error) and
// Release from a real core.StateMachine, passing mode and limit on, so the
// state machine's holder rules decide what coexists.
type modeServer struct {
	lockServer
}

func (s *modeServer) Acquire(ctx context.Context, req *ticketv1.AcquireRequest) (*ticketv1.AcquireResponse, error) {
	cmd := core.Grant(req.GetKey(), req.GetLeaseMs(), req.GetOwner()).WithMode(core.Mode(req.GetMode())).WithLimit(req.GetLimit())
	res, err := s.a.Propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	switch res.Outcome {
	case core.OutcomeGranted:
		return &ticketv1.AcquireResponse{Token: res.Token, LeaseMs: res.LeaseMS}, nil
	case core.OutcomeLimitMismatch:
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("limit is %d", res.Limit))
	}
	return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("held"))
}

func TestHoldersCycle(t *testing.T) {
	tests := []struct {
		name  string
		h     workload.Holding
		other core.Command
		// coexists: worker 0's cycle succeeds while other holds its key.
		coexists bool
	}{
		{"shared_beside_a_reader", workload.HoldShared,
			core.Grant("bench/t/shared", 1000, "reader").WithMode(core.ModeShared), true},
		{"shared_not_beside_a_writer", workload.HoldShared,
			core.Grant("bench/t/shared", 1000, "writer"), false},
		{"exclusive_not_beside_anyone", workload.HoldExclusive,
			core.Grant("bench/t/exclusive", 1000, "writer"), false},
		{"semaphore_beside_a_slot", workload.HoldSemaphore,
			core.Grant("bench/t/semaphore", 1000, "slot").WithLimit(workload.SemaphoreLimit), true},
		{"semaphore_same_limit_only", workload.HoldSemaphore,
			core.Grant("bench/t/semaphore", 1000, "slot").WithLimit(workload.SemaphoreLimit + 1), false},
		{"distinct_beside_another_key", workload.HoldDistinct,
			core.Grant("bench/t/distinct/w1", 1000, "someone"), true},
		{"distinct_not_beside_its_key", workload.HoldDistinct,
			core.Grant("bench/t/distinct/w0", 1000, "someone"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &applier{sm: core.NewStateMachine()}
			mux := http.NewServeMux()
			mux.Handle(ticketv1connect.NewLockServiceHandler(&modeServer{lockServer{a: a}}))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			client := ticketv1connect.NewLockServiceClient(srv.Client(), srv.URL)
			op := workload.Holders(client, 2, "t", tc.h)

			// Alone, every worker cycles: Acquire and Release, nothing left.
			for range 2 {
				for w := range 2 {
					if err := op(context.Background(), w); err != nil {
						t.Fatal(err)
					}
				}
			}
			if a.proposals != 8 || a.sm.HolderLen() != 0 {
				t.Fatalf("proposals %d, holders left %d: want 8 and 0", a.proposals, a.sm.HolderLen())
			}

			if _, err := a.Propose(context.Background(), tc.other); err != nil {
				t.Fatal(err)
			}
			err := op(context.Background(), 0)
			if tc.coexists && err != nil {
				t.Fatalf("cycle beside %s: %v", tc.other.Owner, err)
			}
			if !tc.coexists && err == nil {
				t.Fatalf("cycle beside %s succeeded", tc.other.Owner)
			}
		})
	}
}

func TestHoldingNames(t *testing.T) {
	require.Equal(t, []string{"shared", "exclusive", "semaphore", "distinct"}, []string{
		workload.HoldShared.String(), workload.HoldExclusive.String(), workload.HoldSemaphore.String(), workload.HoldDistinct.String(),
	})
}
