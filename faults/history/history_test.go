package history_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/faults/history"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	refused := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	cases := []struct {
		name string
		kind history.Kind
		err  error
		want history.Outcome
	}{
		{"ok", history.Acquire, nil, history.OK},
		{"acquire_already_exists", history.Acquire, connect.NewError(connect.CodeAlreadyExists, errors.New("held")), history.Fail},
		{"acquire_resource_exhausted", history.Acquire, connect.NewError(connect.CodeResourceExhausted, errors.New("full")), history.Fail},
		{"acquire_invalid", history.Acquire, connect.NewError(connect.CodeInvalidArgument, errors.New("bad")), history.Fail},
		{"acquire_unavailable_is_unknown", history.Acquire, connect.NewError(connect.CodeUnavailable, errors.New("no leader")), history.Unknown},
		{"acquire_deadline_is_unknown", history.Acquire, connect.NewError(connect.CodeDeadlineExceeded, context.DeadlineExceeded), history.Unknown},
		{"acquire_not_found_is_unknown", history.Acquire, connect.NewError(connect.CodeNotFound, errors.New("?")), history.Unknown},
		{"release_not_found", history.Release, connect.NewError(connect.CodeNotFound, errors.New("gone")), history.Fail},
		{"renew_not_found", history.Renew, connect.NewError(connect.CodeNotFound, errors.New("gone")), history.Fail},
		{"release_internal_is_unknown", history.Release, connect.NewError(connect.CodeInternal, errors.New("bug")), history.Unknown},
		{"get_unavailable_is_unknown", history.Get, connect.NewError(connect.CodeUnavailable, errors.New("x")), history.Unknown},
		{"transport_error_is_unknown", history.Acquire, errors.New("connection reset by peer"), history.Unknown},
		{"acquire_limit_mismatch", history.Acquire, connect.NewError(connect.CodeFailedPrecondition, errors.New("limit")), history.Fail},
		{"renew_under_session", history.Renew, connect.NewError(connect.CodeFailedPrecondition, errors.New("session")), history.Fail},
		{"keep_alive_not_found", history.KeepAlive, connect.NewError(connect.CodeNotFound, errors.New("ended")), history.Fail},
		{"close_session_not_found", history.CloseSession, connect.NewError(connect.CodeNotFound, errors.New("ended")), history.Fail},
		{"create_session_exhausted", history.CreateSession, connect.NewError(connect.CodeResourceExhausted, errors.New("full")), history.Fail},
		{"keep_alive_unavailable_is_unknown", history.KeepAlive, connect.NewError(connect.CodeUnavailable, errors.New("x")), history.Unknown},
		{"release_failed_precondition_is_unknown", history.Release, connect.NewError(connect.CodeFailedPrecondition, errors.New("?")), history.Unknown},
		{"refused_connection_is_fail", history.Acquire, connect.NewError(connect.CodeUnavailable, refused), history.Fail},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, _ := history.Classify(tc.kind, tc.err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestRecorder: concurrent clients get unique IDs in invocation order, every
// op is stamped with Call ≤ Return, and unfinished ops come back Unknown.
func TestRecorder(t *testing.T) {
	t.Parallel()
	rec := history.NewRecorder()
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				op := rec.Invoke(history.Op{Client: c, Kind: history.Get, Key: fmt.Sprint(i)})
				op.Outcome = history.OK
				rec.Complete(op)
			}
		}()
	}
	wg.Wait()
	pending := rec.Invoke(history.Op{Client: 9, Kind: history.Acquire, Key: "k"})
	ops := rec.History()
	require.Len(t, ops, 401)
	for i, op := range ops {
		require.Equal(t, i, op.ID)
		require.LessOrEqual(t, op.Call, op.Return)
		if i > 0 {
			require.LessOrEqual(t, ops[i-1].Call, op.Call)
		}
	}
	require.Equal(t, history.Unknown, ops[pending.ID].Outcome)
	require.Equal(t, history.Infinity, ops[pending.ID].EffectiveReturn())
	require.Equal(t, ops[0].Return, ops[0].EffectiveReturn())
}

func TestWriteRead(t *testing.T) {
	t.Parallel()
	ops := []history.Op{
		{ID: 0, Client: 1, Node: 2, Kind: history.Acquire, Key: "k", Owner: "o", LeaseMS: 1000, Wait: true,
			Token: 7, Outcome: history.OK, ResLeaseMS: 1000, Call: 5, Return: 9, Tag: "probe"},
		{ID: 1, Kind: history.CheckToken, Key: "k", Token: 7, Outcome: history.OK, Valid: true, HolderToken: 7, Call: 10, Return: 11},
		{ID: 2, Kind: history.Release, Key: "k", Token: 7, Outcome: history.Unknown, Code: "unavailable", Call: 12, Return: 20},
	}
	var buf bytes.Buffer
	require.NoError(t, history.Write(&buf, ops))
	require.Contains(t, buf.String(), `"kind":"check-token"`)
	back, err := history.Read(&buf)
	require.NoError(t, err)
	require.Equal(t, ops, back)

	_, err = history.Read(bytes.NewBufferString(`{"kind":"teleport"}`))
	require.ErrorIs(t, err, history.ErrBadHistory)
}
