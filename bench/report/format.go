package report

import (
	"fmt"
	"math"
)

// Label names a system as the reader knows it: a backend's lock figures are
// ticketd's (through its API) running on that backend.
func Label(workload, system string) string {
	if (workload == WorkloadLock || workload == WorkloadRenew || workload == WorkloadKeepAlive || workload == WorkloadHandoff || IsHolding(workload)) && !IsPeer(system) {
		return "ticketd/" + system
	}
	return system
}

// WorkloadTitle is a workload's one-line description for headings.
func WorkloadTitle(workload string) string {
	switch workload {
	case WorkloadCommit:
		return "Commit (Propose on the leader, in-process 3-node cluster)"
	case WorkloadLock:
		return "Lock (Acquire+Release cycle through the API)"
	case WorkloadRenew:
		return "Renew (one renewal of a held lock; etcd: LeaseKeepAlive)"
	case WorkloadKeepAlive:
		return fmt.Sprintf("Session keep-alive (each client keeps alive its own session of %d locks; etcd: a lease of %d keys kept alive on its LeaseKeepAlive stream)", KeepAliveKeys, KeepAliveKeys)
	case WorkloadHandoff:
		return "Contended handoff (N clients on one key, Acquire-wait then Release; latency = Release returned → next Acquire returned, may be negative)"
	case WorkloadSharedKey:
		return "Shared lock (N clients on one key in MODE_SHARED, Acquire-wait+Release cycle)"
	case WorkloadExclusiveKey:
		return "Exclusive lock on one key (N clients, Acquire-wait+Release cycle)"
	case WorkloadSemaphoreKey:
		return "Semaphore of limit 8 (N clients on one key, Acquire-wait+Release cycle)"
	case WorkloadDistinctKeys:
		return "Exclusive locks on distinct keys (each client its own key, Acquire-wait+Release cycle; the baseline)"
	case WorkloadSnapshotsOn:
		return "Commit with snapshots and compaction on (default threshold)"
	case WorkloadSnapshotsOff:
		return "Commit with snapshots off (threshold never reached)"
	}
	return workload
}

// IsHolding reports whether workload is one of the shared-locks
// benchmark's: WorkloadSharedKey, WorkloadExclusiveKey,
// WorkloadSemaphoreKey or WorkloadDistinctKeys.
func IsHolding(workload string) bool {
	switch workload {
	case WorkloadSharedKey, WorkloadExclusiveKey, WorkloadSemaphoreKey, WorkloadDistinctKeys:
		return true
	}
	return false
}

// Clients renders a client count with its noun: "1 client", "16 clients".
func Clients(n int) string {
	if n == 1 {
		return "1 client"
	}
	return fmt.Sprintf("%d clients", n)
}

// FormatUS renders a latency in microseconds with a unit that keeps three
// significant digits: "87µs", "312µs", "1.24ms", "15.2ms", "2.10s"; a
// negative latency (a handoff) gets a minus sign: "−40µs"; zero is "-".
func FormatUS(us float64) string {
	switch {
	case us < 0:
		return "−" + FormatUS(-us)
	case us == 0 || math.IsNaN(us):
		return "-"
	case us < 1000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 10_000:
		return fmt.Sprintf("%.2fms", us/1000)
	case us < 100_000:
		return fmt.Sprintf("%.1fms", us/1000)
	case us < 1_000_000:
		return fmt.Sprintf("%.0fms", us/1000)
	}
	return fmt.Sprintf("%.2fs", us/1e6)
}

// FormatRate renders operations per second without decimals below a million.
func FormatRate(perSec float64) string {
	if perSec <= 0 || math.IsNaN(perSec) {
		return "-"
	}
	return fmt.Sprintf("%.0f", perSec)
}

// FormatCPU renders CPU seconds per 1,000 operations with three
// significant digits: "0.412", "1.27", "12.3"; "-" when not measured (0).
func FormatCPU(sec float64) string {
	switch {
	case sec <= 0 || math.IsNaN(sec):
		return "-"
	case sec < 1:
		return fmt.Sprintf("%.3f", sec)
	case sec < 10:
		return fmt.Sprintf("%.2f", sec)
	}
	return fmt.Sprintf("%.1f", sec)
}

// FormatRatio renders a ratio with two decimals and a ×.
func FormatRatio(x float64) string {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f×", x)
}

// heldWord says whether an aim held: "held", "missed" or "not measured".
func heldWord(a Aim) string {
	switch {
	case !a.Measured:
		return "not measured"
	case a.Held:
		return "held"
	}
	return "missed"
}
