package server

import (
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/watch"
)

func TestWatchCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want connect.Code
	}{
		{"slow", watch.ErrSlow, connect.CodeResourceExhausted},
		{"too_many_watchers", fmt.Errorf("%w (3)", watch.ErrTooManyWatchers), connect.CodeResourceExhausted},
		{"compacted", &watch.CompactedError{StartIndex: 1, OldestIndex: 9}, connect.CodeOutOfRange},
		{"closed", watch.ErrClosed, connect.CodeUnavailable},
		{"credentials_changed", watch.ErrCredentialsChanged, connect.CodeUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, codeOf(tt.err))
		})
	}
}

func TestOutOfRangeNamesOldestIndex(t *testing.T) {
	t.Parallel()
	n := &Node{cfg: config.Config{ID: "n1"}, sm: core.NewStateMachine()}
	err := n.toConnect(&watch.CompactedError{StartIndex: 1, OldestIndex: 9})
	require.Equal(t, connect.CodeOutOfRange, connect.CodeOf(err))
	ce, ok := err.(*connect.Error)
	require.True(t, ok)
	var oldest uint64
	for _, d := range ce.Details() {
		v, derr := d.Value()
		require.NoError(t, derr)
		if h, ok := v.(*ticketv1.WatchOutOfRange); ok {
			oldest = h.GetOldestIndex()
		}
	}
	assert.Equal(t, uint64(9), oldest)
}

func TestRangeAtIndexReflectsTheList(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	n := &Node{sm: sm}
	for i := range 3 {
		_, err := sm.Apply(uint64(10+i), core.Grant(fmt.Sprintf("k%d", i), 1000, "o"))
		require.NoError(t, err)
	}
	locks, idx := n.rangeAt("k", "", 0)
	assert.Len(t, locks, 3)
	assert.Equal(t, uint64(12), idx)
}
