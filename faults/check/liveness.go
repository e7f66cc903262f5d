package check

import (
	"fmt"
	"time"

	"github.com/ticketd/ticketd/faults/history"
)

// TagLiveness marks the Get ops a run makes after its workload stopped, to
// see every key become free again.
const TagLiveness = "liveness"

// LivenessWindow describes the quiet end of a run: the workload stopped
// (every holder died without releasing) and every fault was healed.
type LivenessWindow struct {
	// Stopped is when the last workload call had returned (client clock, ns):
	// no Acquire or Renew takes effect later than this, except calls held up
	// on a paused node, which resume by Healed.
	Stopped int64
	// Healed is when every fault had been undone (partitions cleared, paused
	// nodes continued, killed nodes restarted, removed members re-added).
	Healed int64
	// LeaseMS is the longest lease, in milliseconds, the workload asked for.
	LeaseMS int64
	// FailoverBound is how long after Healed the cluster may take to elect a
	// leader, commit its barrier, promote its lessor and commit the Expire of
	// a lock whose deadline passed (see the package documentation).
	FailoverBound time.Duration
}

// Deadline is when every dead holder's key must be free: the lessor's
// deadline is at most lease_ms after the later of the last renewal and the
// new leader's promotion, and Expire commits within the failover bound.
func (w LivenessWindow) Deadline() int64 {
	return max(w.Stopped, w.Healed) + w.LeaseMS*nsPerMS + int64(w.FailoverBound)
}

// Liveness checks that no Get tagged TagLiveness called after w.Deadline()
// still sees a lock granted before the workload stopped; the caller polls
// every key until it is free, past the deadline if need be.
func Liveness(ops []history.Op, w LivenessWindow) []Violation {
	var out []Violation
	deadline := w.Deadline()
	seen := map[string]bool{}
	for _, op := range ops {
		if op.Tag != TagLiveness || op.Kind != history.Get || op.Outcome != history.OK || !op.Held {
			continue
		}
		if op.Call <= deadline || seen[op.Key] {
			continue
		}
		seen[op.Key] = true
		out = append(out, Violation{
			Property: PropLiveness, Key: op.Key, OpIDs: []int{op.ID},
			Detail: fmt.Sprintf("token %d (owner %q) still held at %v, after the deadline %v (stopped %v, healed %v, lease %dms, failover bound %v)",
				op.HolderToken, op.HolderOwner, time.Duration(op.Call), time.Duration(deadline),
				time.Duration(w.Stopped), time.Duration(w.Healed), w.LeaseMS, w.FailoverBound),
		})
	}
	return out
}
