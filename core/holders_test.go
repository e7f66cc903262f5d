package core_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
)

// TestHolderReads checks the reads of a table with shared keys and
// semaphores: Get gives the oldest holder, Holders all in token order,
// Holder one by token, Len counts keys and HolderLen holders, and Range
// keeps all holders of a key together, its limit counting keys.
func TestHolderReads(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	applyAll(t, sm,
		core.Grant("a", 1000, "o1"),                           // token 1
		core.Grant("b", 1000, "r1").WithMode(core.ModeShared), // token 2
		core.Grant("b", 1000, "r2").WithMode(core.ModeShared), // token 3
		core.Grant("c", 1000, "w1").WithLimit(3),              // token 4
		core.Grant("b", 1000, "r3").WithMode(core.ModeShared), // token 5
		core.Grant("c", 1000, "w2").WithLimit(3),              // token 6
		core.Release("b", 2),
	)
	tokens := func(ls []core.Lock) []string {
		out := []string{}
		for _, l := range ls {
			out = append(out, fmt.Sprintf("%s/%d", l.Key, l.Token))
		}
		return out
	}
	first, ok := sm.Get("b")
	require.True(t, ok)
	assert.Equal(t, uint64(3), first.Token, "Get gives the oldest holder")
	assert.Equal(t, []string{"b/3", "b/5"}, tokens(sm.Holders("b")))
	assert.Empty(t, sm.Holders("x"))
	h, ok := sm.Holder("c", 6)
	assert.True(t, ok)
	assert.Equal(t, "w2", h.Owner)
	_, ok = sm.Holder("b", 2)
	assert.False(t, ok, "a released holder")
	assert.Equal(t, 3, sm.Len())
	assert.Equal(t, 5, sm.HolderLen())

	tests := []struct {
		name          string
		prefix, after string
		limit         int
		want          []string
	}{
		{"all", "", "", 0, []string{"a/1", "b/3", "b/5", "c/4", "c/6"}},
		{"limit_counts_keys", "", "", 2, []string{"a/1", "b/3", "b/5"}},
		{"after_a_shared_key", "", "b", 1, []string{"c/4", "c/6"}},
		{"prefix", "b", "", 0, []string{"b/3", "b/5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, tokens(sm.Range(tt.prefix, tt.after, tt.limit)))
		})
	}
}
