package security

import "context"

// This file is the one ownership check (docs/security.md#authorization):
// whether a caller may act on a lock or a session that a principal holds.
// What a caller may do on a key is the policy's (Policy.Allowed, checked by
// the interceptor in authz.go); who may act on a holder or a session once it
// exists is decided here, for every such request.

// MayActFor reports whether the principal of ctx may act on a lock or a
// session that owner acquired or opened: it is owner, or admins is set and
// it holds PermAdmin (an admin may renew, release or close what anyone
// holds, and read every session; a session's KeepAlive is its owner's
// alone). True when authorization is off. The policy is read once, so a
// reload between the two parts of the answer cannot mix two policies.
func (a *Authenticator) MayActFor(ctx context.Context, owner string, admins bool) bool {
	policy := a.currentPolicy()
	if policy == nil {
		return true
	}
	p, _ := PrincipalFrom(ctx)
	return p.Name == owner || (admins && policy.IsAdmin(p.Name))
}
