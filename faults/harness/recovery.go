//go:build faults

package harness

import (
	"time"

	"github.com/ticketd/ticketd/faults/history"
	"github.com/ticketd/ticketd/faults/nemesis"
)

// Recovery returns, per fault kind, the worst time to recover: from the
// end of a fault (its heal, or its injection for an instantaneous one) to
// the return of the first acknowledged write (an OK Acquire, Release or
// Renew) called after it. A fault whose effect never ended before the run
// did (no such write) is left out; so are faults that failed to inject.
func Recovery(events []nemesis.Event, ops []history.Op) map[nemesis.Kind]time.Duration {
	out := map[nemesis.Kind]time.Duration{}
	for _, ev := range events {
		if ev.Err != "" {
			continue
		}
		first := int64(-1)
		for _, op := range ops {
			if op.Call < ev.End || op.Outcome != history.OK || (!op.Mutates() && op.Kind != history.Renew) {
				continue
			}
			if first < 0 || op.Return < first {
				first = op.Return
			}
		}
		if first < 0 {
			continue
		}
		if d := time.Duration(first - ev.End); d > out[ev.Fault.Kind] {
			out[ev.Fault.Kind] = d
		}
	}
	return out
}
