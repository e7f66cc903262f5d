package security_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/security"
)

const examplePolicy = `
rules:
  - principal: orders-svc
    prefix: "orders/"
    allow: [lock]
  - principal: "*"
    prefix: "public/"
    allow: [read]
  - principal: auditor
    allow: [read]
  - principal: ops
    allow: [admin]
`

func TestPolicyAllowed(t *testing.T) {
	p, err := security.ParsePolicy([]byte(examplePolicy))
	require.NoError(t, err)
	tests := []struct {
		name, principal, key string
		perm                 security.Permission
		want                 bool
	}{
		{"lock_on_own_prefix", "orders-svc", "orders/1", security.PermLock, true},
		{"lock_implies_read", "orders-svc", "orders/1", security.PermRead, true},
		{"no_lock_outside_prefix", "orders-svc", "billing/1", security.PermLock, false},
		{"star_reads_public", "anyone", "public/x", security.PermRead, true},
		{"star_cannot_lock_public", "anyone", "public/x", security.PermLock, false},
		{"read_everywhere_no_lock", "auditor", "orders/1", security.PermLock, false},
		{"read_everywhere", "auditor", "zzz", security.PermRead, true},
		{"admin_everything", "ops", "orders/1", security.PermLock, true},
		{"admin_is_admin", "ops", "", security.PermAdmin, true},
		{"lock_is_not_admin", "orders-svc", "", security.PermAdmin, false},
		{"unknown_principal", "mallory", "orders/1", security.PermRead, false},
		{"empty_principal", "", "public/x", security.PermRead, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, p.Allowed(tc.principal, tc.key, tc.perm))
		})
	}
	assert.True(t, p.AllowedAnywhere("orders-svc", security.PermLock), "lock on orders/")
	assert.False(t, p.AllowedAnywhere("auditor", security.PermLock), "read only")
	assert.True(t, p.AllowedAnywhere("auditor", security.PermRead))
	assert.False(t, p.AllowedAnywhere("anyone", security.PermLock), "* only reads public/")
	assert.True(t, p.AllowedAnywhere("ops", security.PermLock), "admin")
	assert.True(t, p.AllowedAnywhere("mallory", security.PermRead), "* reads public/")
	assert.False(t, p.AllowedAnywhere("orders-svc", security.PermAdmin))
	assert.True(t, p.AllowedPrefix("orders-svc", "orders/a", security.PermRead))
	assert.False(t, p.AllowedPrefix("orders-svc", "", security.PermRead))
	assert.True(t, p.IsAdmin("ops"))
	assert.False(t, p.IsAdmin("orders-svc"))
}

func TestParsePolicyStrict(t *testing.T) {
	tests := []struct{ name, yaml string }{
		{"unknown_field", "rules:\n  - principal: a\n    allow: [read]\n    deny: [lock]\n"},
		{"unknown_top_level_field", "rule:\n  - principal: a\n"},
		{"unknown_permission", "rules:\n  - principal: a\n    allow: [write]\n"},
		{"empty_principal", "rules:\n  - principal: \"\"\n    allow: [read]\n"},
		{"missing_principal", "rules:\n  - allow: [read]\n"},
		{"empty_allow", "rules:\n  - principal: a\n"},
		{"admin_with_prefix", "rules:\n  - principal: a\n    prefix: x/\n    allow: [admin]\n"},
		{"control_character", "rules:\n  - principal: \"a\\nb\"\n    allow: [read]\n"},
		{"not_yaml", "rules: [\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := security.ParsePolicy([]byte(tc.yaml))
			require.ErrorIs(t, err, security.ErrBadPolicy)
		})
	}
	p, err := security.ParsePolicy(nil)
	require.NoError(t, err)
	assert.False(t, p.Allowed("a", "k", security.PermRead), "an empty policy allows nothing")
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(examplePolicy))
	f.Add([]byte("rules:\n  - principal: a\n    allow: [admin]\n"))
	f.Add([]byte("rules: []"))
	f.Add([]byte("rules:\n  - principal: \"*\"\n    prefix: \"\"\n    allow: [read, lock]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := security.ParsePolicy(data)
		if err != nil {
			require.ErrorIs(t, err, security.ErrBadPolicy)
			return
		}
		for _, r := range p.Rules() {
			require.NotEmpty(t, r.Principal)
			require.NotEmpty(t, r.Allow)
			for _, perm := range r.Allow {
				if perm == security.PermAdmin {
					require.Empty(t, r.Prefix)
				}
			}
		}
		// Admin implies everything; nobody unnamed is allowed anything.
		for _, r := range p.Rules() {
			if p.IsAdmin(r.Principal) {
				require.True(t, p.Allowed(r.Principal, "any", security.PermLock))
			}
		}
		require.False(t, p.Allowed("", "", security.PermRead))
	})
}
