package security_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/security"
)

const quotaPolicy = `
rules:
  - principal: "*"
    allow: [lock]
default_quota: {locks: 100, watchers: 10, waiters: 20, sessions: 5}
quotas:
  - {principal: bob, locks: 10000, watchers: 100, waiters: 1000, sessions: 1000}
  - {principal: carol, locks: 3}
  - {principal: ops, locks: 0, watchers: 0, waiters: 0, sessions: 0}
`

// TestPolicyQuotaOf: a principal's own entry gives its quota; a field it
// leaves out comes from default_quota, and 0 lifts the limit; a principal
// without an entry has default_quota. Each limit says which key it is from.
func TestPolicyQuotaOf(t *testing.T) {
	p, err := security.ParsePolicy([]byte(quotaPolicy))
	require.NoError(t, err)
	type lim struct {
		n   int
		key string
	}
	limits := func(q security.Quota) map[security.QuotaKind]lim {
		out := map[security.QuotaKind]lim{}
		for _, k := range security.QuotaKinds {
			n, key := q.Limit(k)
			out[k] = lim{n, key}
		}
		return out
	}
	assert.Equal(t, map[security.QuotaKind]lim{
		security.QuotaLocks: {10000, "quotas"}, security.QuotaSessions: {1000, "quotas"},
		security.QuotaWatchers: {100, "quotas"}, security.QuotaWaiters: {1000, "quotas"},
	}, limits(p.QuotaOf("bob")))
	assert.Equal(t, map[security.QuotaKind]lim{
		security.QuotaLocks: {3, "quotas"}, security.QuotaSessions: {5, "default_quota"},
		security.QuotaWatchers: {10, "default_quota"}, security.QuotaWaiters: {20, "default_quota"},
	}, limits(p.QuotaOf("carol")))
	assert.Equal(t, security.Quota{Locks: 100, Sessions: 5, Watchers: 10, Waiters: 20}, p.QuotaOf("dave"))
	for _, k := range security.QuotaKinds {
		n, _ := p.QuotaOf("ops").Limit(k)
		assert.Zero(t, n, "ops lifts %s", k)
	}

	none, err := security.ParsePolicy([]byte("rules: [{principal: a, allow: [read]}]\n"))
	require.NoError(t, err)
	assert.Equal(t, security.Quota{}, none.QuotaOf("a"), "no quotas: no per-principal limit")
}

// TestPolicyQuotaRefused: a bad quota section refuses the whole file with
// an error naming what is wrong.
func TestPolicyQuotaRefused(t *testing.T) {
	tests := []struct{ name, yaml, msg string }{
		{"unknown_field", "quotas: [{principal: bob, lockz: 3}]", "field lockz not found in a quotas entry (principal, locks, sessions, watchers, waiters)"},
		{"unknown_default_field", "default_quota: {keys: 3}", "field keys not found in default_quota (locks, sessions, watchers, waiters)"},
		{"negative", "quotas: [{principal: bob, watchers: -1}]", "quotas[0] (bob): watchers is -1"},
		{"negative_default", "default_quota: {sessions: -2}", "default_quota: sessions is -2"},
		{"no_principal", "quotas: [{locks: 3}]", "quotas[0]: principal is missing"},
		{"empty_principal", `quotas: [{principal: "", locks: 3}]`, "principal is empty"},
		{"star", `quotas: [{principal: "*", locks: 3}]`, "default_quota"},
		{"twice", "quotas: [{principal: bob, locks: 3}, {principal: bob, waiters: 3}]", `quotas[1]: principal "bob" has a quota already`},
		{"not_a_number", "quotas: [{principal: bob, locks: many}]", "cannot unmarshal"},
		{"control_character", "quotas: [{principal: \"b\\x01ob\", locks: 3}]", "quotas[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := security.ParsePolicy([]byte(tc.yaml))
			require.Error(t, err)
			assert.True(t, errors.Is(err, security.ErrBadPolicy), "%v", err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

// TestQuotaError: the message names the principal, the limit, the kind and
// the policy key; errors.Is sees ErrQuotaExceeded, and ToConnect makes it
// ResourceExhausted.
func TestQuotaError(t *testing.T) {
	err := error(&security.QuotaError{Principal: "bob", Kind: security.QuotaLocks, Limit: 10000, Key: "quotas"})
	assert.Equal(t, "principal bob is at its quota of 10000 locks (policy quotas)", err.Error())
	assert.ErrorIs(t, err, security.ErrQuotaExceeded)
	assert.Equal(t, "resource_exhausted: principal bob is at its quota of 10000 locks (policy quotas)", security.ToConnect(err).Error())
}
