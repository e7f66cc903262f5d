package server

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// TestMinCommandVersion: the cluster command version is the minimum over
// the configuration, learners included, and nothing (0) while any member's
// version is unknown; answers of members no longer in the configuration do
// not count.
func TestMinCommandVersion(t *testing.T) {
	t.Parallel()
	three := []core.Member{{ID: "n1", Voter: true}, {ID: "n2", Voter: true}, {ID: "n3", Voter: true}}
	withLearner := append(append([]core.Member{}, three...), core.Member{ID: "n4"})
	tests := []struct {
		name    string
		members []core.Member
		known   map[string]byte
		want    byte
	}{
		{"all_new", three, map[string]byte{"n1": 4, "n2": 4, "n3": 4}, 4},
		{"one_older", three, map[string]byte{"n1": 4, "n2": 3, "n3": 4}, 3},
		{"one_newer", three, map[string]byte{"n1": 4, "n2": 5, "n3": 4}, 4},
		{"one_unknown", three, map[string]byte{"n1": 4, "n3": 4}, 0},
		{"one_predates_the_field", three, map[string]byte{"n1": 4, "n2": 0, "n3": 4}, 0},
		{"older_learner", withLearner, map[string]byte{"n1": 4, "n2": 4, "n3": 4, "n4": 3}, 3},
		{"unknown_learner", withLearner, map[string]byte{"n1": 4, "n2": 4, "n3": 4}, 0},
		{"removed_member_older", three, map[string]byte{"n1": 4, "n2": 4, "n3": 4, "n9": 1}, 4},
		{"lone_node", three[:1], map[string]byte{"n1": 4}, 4},
		{"no_members", nil, map[string]byte{"n1": 4}, 0},
		{"nothing_known", three, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, minCommandVersion(tt.members, tt.known))
		})
	}
}

// TestCommandVersionsPerTerm: the gate opens only on a decision of the
// current term over members that all answered in it; a new term starts
// with nothing known and nothing allowed, and answers or decisions of an
// earlier term are dropped.
func TestCommandVersionsPerTerm(t *testing.T) {
	t.Parallel()
	members := []core.Member{{ID: "n1", Voter: true}, {ID: "n2", Voter: true}}
	var c commandVersions
	assert.False(t, c.allows(core.CommandVersion4), "the zero value allows nothing new")
	assert.True(t, c.allows(0))

	c.reset(5)
	c.record(5, "n1", 4)
	assert.Zero(t, c.decide(5, members), "n2 unknown")
	assert.False(t, c.allows(core.CommandVersion4))

	c.record(5, "n2", 3)
	assert.Equal(t, core.CommandVersion3, c.decide(5, members))
	assert.False(t, c.allows(core.CommandVersion4), "n2 applies up to 3")
	assert.True(t, c.allows(core.CommandVersion3))

	c.record(5, "n2", 4) // n2 restarted with a newer binary
	assert.Equal(t, core.CommandVersion4, c.decide(5, members))
	assert.True(t, c.allows(core.CommandVersion4))
	assert.Equal(t, core.CommandVersion4, c.Version())

	c.reset(6)
	assert.False(t, c.allows(core.CommandVersion4), "a new term decides again")
	assert.Zero(t, c.Version())
	c.record(5, "n1", 4)
	c.record(5, "n2", 4)
	assert.Zero(t, c.decide(5, members), "a decision of an earlier term is dropped")
	assert.False(t, c.allows(core.CommandVersion4))
	assert.Zero(t, c.decide(6, members), "answers of an earlier term are dropped")

	c.record(6, "n1", 4)
	c.record(6, "n2", 4)
	assert.Equal(t, core.CommandVersion4, c.decide(6, members))
	assert.True(t, c.allows(core.CommandVersion4))
}

// TestCommandVersionOf: a Status without the field (an older binary) says
// 0; a version past a byte is taken as the largest byte, never wrapped
// around to a small one.
func TestCommandVersionOf(t *testing.T) {
	t.Parallel()
	assert.Zero(t, commandVersionOf(&ticketv1.StatusResponse{}))
	assert.Equal(t, core.CommandVersion4, commandVersionOf(&ticketv1.StatusResponse{MaxCommandVersion: 4}))
	assert.Equal(t, byte(255), commandVersionOf(&ticketv1.StatusResponse{MaxCommandVersion: 260}))
}
