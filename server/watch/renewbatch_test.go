package watch_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/watch"
)

// TestAppendEventsOfRenewBatch: a RenewBatch sends the RENEWED event of
// each lock it renewed, in the batch's order, with the entry's index, as
// Renew entries of their own would; its session keep-alives and the
// renewals that found no lock send nothing.
func TestAppendEventsOfRenewBatch(t *testing.T) {
	t.Parallel()
	cmd := core.RenewBatch([]uint64{3}, []core.LockRef{{Key: "b", Token: 9}, {Key: "a", Token: 4}, {Key: "c", Token: 1}})
	res := core.Result{Outcome: core.OutcomeRenewed, Batch: &core.BatchResult{
		Sessions: []core.Result{{Outcome: core.OutcomeRenewed, LeaseMS: 5000, Session: 3}},
		Locks: []core.Result{
			{Outcome: core.OutcomeRenewed, LeaseMS: 1000},
			{Outcome: core.OutcomeRenewed, LeaseMS: 2000},
			{Outcome: core.OutcomeNotFound},
		},
	}}
	got := watch.AppendEvents(nil, 12, cmd, res)
	assert.Equal(t, []watch.Event{
		{Type: watch.Renewed, Key: "b", Token: 9, LeaseMS: 1000, Index: 12},
		{Type: watch.Renewed, Key: "a", Token: 4, LeaseMS: 2000, Index: 12},
	}, got)
	_, ok := watch.EventOf(12, cmd, res)
	assert.False(t, ok, "a batch is not one event")
}
