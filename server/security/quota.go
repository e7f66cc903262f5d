package security

import (
	"errors"
	"fmt"
	"strings"
)

// This file is the policy file's per-principal quotas (docs/security.md#quotas):
// how many locks, sessions, watchers and waiters one principal may have, so
// that one principal cannot fill a cluster-wide limit (limits.max_locks,
// limits.max_watchers, ...) and lock every other principal out. Consul's ACL
// and etcd's quota backend bound a whole cluster; per-tenant limits follow
// the same idea one principal at a time.

// QuotaKind is one kind of per-principal quota, named as in the policy file.
type QuotaKind string

// The quota kinds. Locks and sessions are counted cluster-wide, from the
// replicated lock table (every holder bound to the principal, every session
// it opened) with the grants and creates in flight on the leader; watchers
// (Watch streams) and waiters (Acquire requests queued on the leader) are
// counted on each node.
const (
	QuotaLocks    QuotaKind = "locks"
	QuotaSessions QuotaKind = "sessions"
	QuotaWatchers QuotaKind = "watchers"
	QuotaWaiters  QuotaKind = "waiters"
)

// QuotaKinds lists every quota kind, in the order metrics and docs show them.
var QuotaKinds = []QuotaKind{QuotaLocks, QuotaSessions, QuotaWatchers, QuotaWaiters}

// Policy file keys a quota comes from, named in QuotaError.
const (
	QuotaKeyNamed   = "quotas"        // the principal's own entry
	QuotaKeyDefault = "default_quota" // the default for principals without one
)

// Quota is one principal's limit of each kind, resolved: 0 is no
// per-principal limit (the cluster-wide limits.* still apply).
type Quota struct {
	Locks, Sessions, Watchers, Waiters int
	// named[i] is true when QuotaKinds[i]'s limit comes from the principal's
	// own entry in quotas, false when from default_quota (or neither).
	named [4]bool
}

// Limit returns q's limit of kind (0: none) and the policy key it comes
// from (QuotaKeyNamed or QuotaKeyDefault).
func (q Quota) Limit(kind QuotaKind) (int, string) {
	var n int
	var i int
	switch kind {
	case QuotaLocks:
		n, i = q.Locks, 0
	case QuotaSessions:
		n, i = q.Sessions, 1
	case QuotaWatchers:
		n, i = q.Watchers, 2
	case QuotaWaiters:
		n, i = q.Waiters, 3
	default:
		return 0, ""
	}
	if q.named[i] {
		return n, QuotaKeyNamed
	}
	return n, QuotaKeyDefault
}

// quotaFields is a quota's YAML form; a nil field was not given.
type quotaFields struct {
	Locks    *int `yaml:"locks"`
	Sessions *int `yaml:"sessions"`
	Watchers *int `yaml:"watchers"`
	Waiters  *int `yaml:"waiters"`
}

// principalQuota is one entry of the policy file's quotas list.
type principalQuota struct {
	Principal   *string `yaml:"principal"`
	quotaFields `yaml:",inline"`
}

// quotaTypeNames turns the decoder's Go type names in an unknown-field
// error into the policy file's terms.
var quotaTypeNames = strings.NewReplacer(
	"in type security.principalQuota", "in a quotas entry (principal, locks, sessions, watchers, waiters)",
	"in type security.quotaFields", "in default_quota (locks, sessions, watchers, waiters)",
)

// fields returns f's values in QuotaKinds order, nil where not given.
func (f quotaFields) fields() [4]*int {
	return [4]*int{f.Locks, f.Sessions, f.Watchers, f.Waiters}
}

// check refuses a negative limit; what names the entry in the error.
func (f quotaFields) check(what string) error {
	for i, v := range f.fields() {
		if v != nil && *v < 0 {
			return fmt.Errorf("%w: %s: %s is %d; a quota is 0 (no per-principal limit) or more",
				ErrBadPolicy, what, QuotaKinds[i], *v)
		}
	}
	return nil
}

// resolve returns the quota of an entry f over the default d: a field f
// gives (0 included, which lifts the default) is the principal's own, one
// it leaves out is d's.
func (f quotaFields) resolve(d Quota) Quota {
	q := d
	vals := [4]*int{&q.Locks, &q.Sessions, &q.Watchers, &q.Waiters}
	for i, v := range f.fields() {
		if v != nil {
			*vals[i] = *v
			q.named[i] = true
		}
	}
	return q
}

// parseQuotas checks and resolves the policy file's default_quota and
// quotas. Errors wrap ErrBadPolicy: a negative limit, an entry without a
// principal or with "*" (that is default_quota's job), a principal named
// twice. Unknown fields are refused by the strict decoder.
func parseQuotas(def *quotaFields, list []principalQuota) (Quota, map[string]Quota, error) {
	var d Quota
	if def != nil {
		if err := def.check(QuotaKeyDefault); err != nil {
			return Quota{}, nil, err
		}
		d = def.resolve(Quota{})
		d.named = [4]bool{} // default_quota's limits are nobody's own
	}
	named := map[string]Quota{}
	for i, e := range list {
		if e.Principal == nil {
			return Quota{}, nil, fmt.Errorf("%w: quotas[%d]: principal is missing", ErrBadPolicy, i)
		}
		p := *e.Principal
		if p == AnyPrincipal {
			return Quota{}, nil, fmt.Errorf("%w: quotas[%d]: principal %q: every principal's quota is default_quota", ErrBadPolicy, i, p)
		}
		if err := validatePrincipalName(p); err != nil {
			return Quota{}, nil, fmt.Errorf("%w: quotas[%d]: %v", ErrBadPolicy, i, err)
		}
		if _, dup := named[p]; dup {
			return Quota{}, nil, fmt.Errorf("%w: quotas[%d]: principal %q has a quota already", ErrBadPolicy, i, p)
		}
		if err := e.check(fmt.Sprintf("quotas[%d] (%s)", i, p)); err != nil {
			return Quota{}, nil, err
		}
		named[p] = e.resolve(d)
	}
	return d, named, nil
}

// QuotaOf returns principal's quota: its entry in quotas, whose fields left
// out come from default_quota, else default_quota; all zero (no
// per-principal limit) when the policy has neither.
func (p *Policy) QuotaOf(principal string) Quota {
	if q, ok := p.quotas[principal]; ok {
		return q
	}
	return p.defaultQuota
}

// Quota returns the quota of principal under the current policy: the zero
// Quota (no limit) when authorization is off.
func (a *Authenticator) Quota(principal string) Quota {
	policy := a.currentPolicy()
	if policy == nil {
		return Quota{}
	}
	return policy.QuotaOf(principal)
}

// ErrQuotaExceeded: a principal is at its quota of one kind; returned as a
// *QuotaError naming the principal, the kind, the limit and the policy key.
// The API maps it to ResourceExhausted; nothing changed, and every other
// principal is still served.
var ErrQuotaExceeded = errors.New("security: principal quota reached")

// QuotaError is the ErrQuotaExceeded of one request.
type QuotaError struct {
	Principal string
	Kind      QuotaKind
	Limit     int
	// Key is the policy file key the limit comes from: QuotaKeyNamed or
	// QuotaKeyDefault.
	Key string
}

// Error implements error: "principal bob is at its quota of 10 locks
// (policy quotas)".
func (e *QuotaError) Error() string {
	return fmt.Sprintf("principal %s is at its quota of %d %s (policy %s)", e.Principal, e.Limit, e.Kind, e.Key)
}

// Is reports whether target is ErrQuotaExceeded.
func (e *QuotaError) Is(target error) bool { return target == ErrQuotaExceeded }
