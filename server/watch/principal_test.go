package watch_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/watch"
)

// errAtQuota is what the test's Admit refuses with.
var errAtQuota = errors.New("at quota")

// quotaWatch is a watch by principal, admitted while it has fewer than
// limit watchers open.
func quotaWatch(principal string, limit int) watch.Request {
	return watch.Request{Principal: principal, Admit: func(open int) error {
		if open >= limit {
			return fmt.Errorf("%w: %s has %d", errAtQuota, principal, open)
		}
		return nil
	}}
}

// TestPrincipalWatchersAdmit: a principal's open watchers are counted; past
// what Admit allows its next watch is refused with Admit's error while
// another principal's is registered; a watcher closed by its client or
// ended by the hub gives its place back.
func TestPrincipalWatchersAdmit(t *testing.T) {
	tb := newTable(t, watch.DefaultConfig())
	h := tb.hub
	w1, err := h.Watch(quotaWatch("bob", 2))
	require.NoError(t, err)
	_, err = h.Watch(quotaWatch("bob", 2))
	require.NoError(t, err)
	_, err = h.Watch(quotaWatch("bob", 2))
	require.ErrorIs(t, err, errAtQuota)
	assert.Equal(t, 2, h.PrincipalWatchers("bob"))
	assert.Equal(t, 2, h.Watchers(), "the refused watch registered nothing")

	_, err = h.Watch(quotaWatch("alice", 2))
	require.NoError(t, err, "another principal still watches")
	_, err = h.Watch(watch.Request{}) // authorization off: never counted
	require.NoError(t, err)
	assert.Equal(t, 1, h.PrincipalWatchers("alice"))

	w1.Close()
	w1.Close() // twice: counted once
	assert.Equal(t, 1, h.PrincipalWatchers("bob"))
	_, err = h.Watch(quotaWatch("bob", 2))
	require.NoError(t, err, "a closed watcher gave its place back")

	h.EndAll(watch.ErrCredentialsChanged)
	assert.Zero(t, h.PrincipalWatchers("bob"))
	assert.Zero(t, h.PrincipalWatchers("alice"))
}
