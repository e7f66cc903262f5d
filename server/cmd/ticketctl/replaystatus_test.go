package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// TestStatusReplaying: a node restarted alone after the whole cluster
// stopped (hashicorp raft applies nothing past its snapshot without a
// leader) is replaying; "status" against it says "replaying (applied X of
// Y)" and shows the last token and the locks held as unknown, in text and
// in "status --all", and leaves them out of -o json, instead of zeros that read as
// data loss; it still exits 0, as it answered.
func TestStatusReplaying(t *testing.T) {
	c := ticketdtest.Start(t, ticketdtest.Options{Backend: "hashicorp"})
	leader := c.WaitLeader(t, 30*time.Second)
	ctx := t.Context()
	for _, k := range []string{"a", "b"} {
		_, err := c.Lock(leader).Acquire(ctx, &ticketv1.AcquireRequest{Key: k, LeaseMs: 60_000, Owner: "o"})
		require.NoError(t, err)
	}
	for i := range c.Len() {
		c.Terminate(i)
	}
	c.Restart(0)
	ep := c.Node(0).APIAddr
	var st *ticketv1.StatusResponse
	require.Eventually(t, func() bool {
		var err error
		st, err = c.Status(0)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the restarted node answers Status")
	require.True(t, st.GetReplaying(), "alone, the node cannot apply its log: %v", st)

	code, out, errs := ctl(t, ep, "--timeout", "5s", "status")
	require.Equal(t, exitOK, code, "stderr %q", errs)
	assert.Contains(t, out, "replaying (applied ")
	assert.Regexp(t, `replaying \(applied \d+ of \d+\)`, out)
	assert.Regexp(t, `(?m)^last token:\s+unknown \(replaying\)$`, out, "unknown, not 0 nor blank")
	assert.Regexp(t, `(?m)^locks held:\s+unknown \(replaying\)$`, out, "unknown, not 0 nor blank")

	code, out, errs = ctl(t, ep, "--timeout", "5s", "-o", "json", "status")
	require.Equal(t, exitOK, code, "stderr %q", errs)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m), out)
	assert.Equal(t, true, m["replaying"])
	assert.NotContains(t, m, "lastToken")
	assert.NotContains(t, m, "locksHeld")

	code, out, errs = ctl(t, ep, "--timeout", "5s", "status", "--all")
	require.Equal(t, exitOK, code, "stderr %q", errs)
	row := strings.Split(strings.TrimSpace(out), "\n")[1]
	assert.Contains(t, row, "replaying, ")
	assert.NotRegexp(t, `\s0\s+0\s`, row, "no zeros for the last token and locks held")
	assert.Contains(t, row, "unknown")
}
