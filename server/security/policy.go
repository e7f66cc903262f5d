package security

import (
	"fmt"
	"strings"
)

// Permission is what a policy rule allows.
type Permission uint8

// Permissions, in the policy file's names. Lock implies Read on the same
// prefix; Admin is cluster-wide and implies every other permission on every
// key (etcd's root role, Consul's operator policy).
const (
	// PermRead: GetLock, ListLocks, CheckToken, Watch on the rule's prefix.
	PermRead Permission = iota + 1
	// PermLock: Acquire, Renew and Release of one's own locks on the
	// rule's prefix, and PermRead there.
	PermLock
	// PermAdmin: ClusterService mutations (AddMember, RemoveMember,
	// TransferLeader, Snapshot), force-release, every key and every
	// principal's locks.
	PermAdmin
)

// String returns the policy file's name of p.
func (p Permission) String() string {
	switch p {
	case PermRead:
		return "read"
	case PermLock:
		return "lock"
	case PermAdmin:
		return "admin"
	}
	return fmt.Sprintf("permission(%d)", uint8(p))
}

// parsePermission maps a policy file name to its Permission.
func parsePermission(s string) (Permission, bool) {
	switch s {
	case "read":
		return PermRead, true
	case "lock":
		return PermLock, true
	case "admin":
		return PermAdmin, true
	}
	return 0, false
}

// AnyPrincipal in a rule's principal matches every authenticated principal.
const AnyPrincipal = "*"

// Rule is one policy rule: Principal (or AnyPrincipal) has Allow on every
// key starting with Prefix ("" is every key).
type Rule struct {
	Principal string
	Prefix    string
	Allow     []Permission
}

// Policy is a parsed policy file: a list of allow rules; what no rule
// allows is denied. Immutable once parsed; safe for concurrent use.
type Policy struct {
	rules []Rule
	// quotas and defaultQuota are the per-principal quotas (quota.go).
	quotas       map[string]Quota
	defaultQuota Quota
}

// policyFile is the YAML form (docs/security.md#policy-file; its field names
// are a public format and never change).
type policyFile struct {
	Rules []struct {
		Principal *string  `yaml:"principal"`
		Prefix    string   `yaml:"prefix"`
		Allow     []string `yaml:"allow"`
	} `yaml:"rules"`
	Quotas       []principalQuota `yaml:"quotas"`
	DefaultQuota *quotaFields     `yaml:"default_quota"`
}

// ParsePolicy parses a policy file strictly. Errors wrap ErrBadPolicy: an
// unknown field, a missing or empty principal, an empty or unknown
// permission list, admin with a non-empty prefix (admin is cluster-wide),
// a prefix with control characters, and the quota errors of parseQuotas.
func ParsePolicy(data []byte) (*Policy, error) {
	var f policyFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadPolicy, quotaTypeNames.Replace(err.Error()))
	}
	p := &Policy{}
	for i, r := range f.Rules {
		if r.Principal == nil {
			return nil, fmt.Errorf("%w: rules[%d]: principal is missing", ErrBadPolicy, i)
		}
		if *r.Principal != AnyPrincipal { // "*" matches every authenticated principal
			if err := validatePrincipalName(*r.Principal); err != nil {
				return nil, fmt.Errorf("%w: rules[%d]: %v", ErrBadPolicy, i, err)
			}
		}
		if strings.ContainsFunc(r.Prefix, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return nil, fmt.Errorf("%w: rules[%d]: prefix %q has a control character", ErrBadPolicy, i, r.Prefix)
		}
		if len(r.Allow) == 0 {
			return nil, fmt.Errorf("%w: rules[%d] (%s): allow is empty (read, lock or admin)", ErrBadPolicy, i, *r.Principal)
		}
		rule := Rule{Principal: *r.Principal, Prefix: r.Prefix}
		for _, a := range r.Allow {
			perm, ok := parsePermission(a)
			if !ok {
				return nil, fmt.Errorf("%w: rules[%d] (%s): unknown permission %q (read, lock or admin)", ErrBadPolicy, i, *r.Principal, a)
			}
			if perm == PermAdmin && r.Prefix != "" {
				return nil, fmt.Errorf("%w: rules[%d] (%s): admin is cluster-wide; it takes no prefix", ErrBadPolicy, i, *r.Principal)
			}
			rule.Allow = append(rule.Allow, perm)
		}
		p.rules = append(p.rules, rule)
	}
	var err error
	if p.defaultQuota, p.quotas, err = parseQuotas(f.DefaultQuota, f.Quotas); err != nil {
		return nil, err
	}
	return p, nil
}

// Rules returns a copy of the policy's rules.
func (p *Policy) Rules() []Rule {
	out := make([]Rule, len(p.rules))
	copy(out, p.rules)
	return out
}

// IsAdmin reports whether principal holds PermAdmin.
func (p *Policy) IsAdmin(principal string) bool {
	for _, r := range p.rules {
		if r.matches(principal) && r.has(PermAdmin) {
			return true
		}
	}
	return false
}

// Allowed reports whether principal may do perm on key: an admin may do
// anything; otherwise some rule for principal (or "*") whose prefix key
// starts with allows perm (PermLock covering PermRead).
func (p *Policy) Allowed(principal, key string, perm Permission) bool {
	if p.IsAdmin(principal) {
		return true
	}
	if perm == PermAdmin {
		return false
	}
	for _, r := range p.rules {
		if r.matches(principal) && strings.HasPrefix(key, r.Prefix) && r.grants(perm) {
			return true
		}
	}
	return false
}

// AllowedPrefix reports whether principal may do perm on every key starting
// with prefix (one rule's prefix is a prefix of it), so that a listing of
// prefix needs no filtering.
func (p *Policy) AllowedPrefix(principal, prefix string, perm Permission) bool {
	return p.Allowed(principal, prefix, perm)
}

// AllowedAnywhere reports whether principal may do perm on at least one
// prefix: an admin, or some rule for principal (or "*") allows perm
// (PermLock covering PermRead). It gates requests bound to no key, such as
// CreateSession, which needs the lock permission somewhere.
func (p *Policy) AllowedAnywhere(principal string, perm Permission) bool {
	if p.IsAdmin(principal) {
		return true
	}
	if perm == PermAdmin {
		return false
	}
	for _, r := range p.rules {
		if r.matches(principal) && r.grants(perm) {
			return true
		}
	}
	return false
}

// matches reports whether the rule applies to principal.
func (r Rule) matches(principal string) bool {
	return principal != "" && (r.Principal == AnyPrincipal || r.Principal == principal)
}

// has reports whether the rule lists perm itself.
func (r Rule) has(perm Permission) bool {
	for _, a := range r.Allow {
		if a == perm {
			return true
		}
	}
	return false
}

// grants reports whether the rule allows perm, lock implying read.
func (r Rule) grants(perm Permission) bool {
	return r.has(perm) || (perm == PermRead && r.has(PermLock))
}
