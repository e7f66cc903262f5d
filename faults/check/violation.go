package check

import (
	"errors"
	"fmt"
	"strings"
)

// Property names a safety or liveness property the checkers verify.
type Property string

// The properties checked after every fault run (docs/faults.md).
const (
	// PropLinearizable: the history is linearizable against the lock-table model.
	PropLinearizable Property = "linearizability"
	// PropFencing: tokens strictly increase in real-time order; no token is granted twice.
	PropFencing Property = "fencing"
	// PropLease: no key is granted to another holder before the previous
	// holder's last acknowledged Acquire or Renew call started + lease_ms.
	PropLease Property = "lease-safety"
	// PropLimit: more holders of a semaphore than its limit, or holders of
	// two limits, were alive at once.
	PropLimit Property = "holder-limit"
	// PropDurability: acknowledged grants and releases survive restarts.
	PropDurability Property = "durability"
	// PropLiveness: a dead holder's key is free again within lease_ms + the failover bound.
	PropLiveness Property = "liveness"
)

// Violation is one broken property, with the operations that show it.
type Violation struct {
	// Property is the property broken; Key the lock it was broken on ("" for none).
	Property Property
	Key      string
	// OpIDs are the history.Op IDs involved, earliest first.
	OpIDs []int
	// Detail explains the violation for humans.
	Detail string
}

// String formats v on one line.
func (v Violation) String() string {
	return fmt.Sprintf("%s: key %q: %s (ops %v)", v.Property, v.Key, v.Detail, v.OpIDs)
}

// Sentinel errors of package check.
var (
	// ErrViolation: a history breaks at least one property; the error is a
	// *ViolationsError listing them.
	ErrViolation = errors.New("check: property violated")
)

// ViolationsError lists the violations of one run. errors.Is(err, ErrViolation) is true for it.
type ViolationsError struct{ Violations []Violation }

// Error implements error.
func (e *ViolationsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d violation(s):", len(e.Violations))
	for _, v := range e.Violations {
		b.WriteString("\n  ")
		b.WriteString(v.String())
	}
	return b.String()
}

// Is reports whether target is ErrViolation.
func (e *ViolationsError) Is(target error) bool { return target == ErrViolation }
