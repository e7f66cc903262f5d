// Package hoptrace records when one commit passes each hop of the etcd
// backend's write path — the proposer, the leader's loop and fsync, its
// peer sender, the follower's stream reader, loop and fsync, the
// acknowledgement's way back, apply and the proposer's wake-up — keyed by
// node and log index, so that BenchmarkCommitHops (backends/etcd) can
// print the median offset of each hop from the proposer's call.
//
// It records nothing unless the environment variable HOPTRACE is set when
// the process starts; then every hook takes a mutex, so use it at one
// proposer only (docs/benchmarks.md, "Where a commit's time goes").
package hoptrace

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// On reports whether hops are recorded (HOPTRACE set at start).
var On = os.Getenv("HOPTRACE") != ""

type key struct {
	node, peer uint64
	ev         string
	idx        uint64
}

var (
	mu    sync.Mutex
	marks = map[key]int64{}
	base  = time.Now()
)

// Now is the time Mark would record, in nanoseconds since the process
// started (0 when not On).
func Now() int64 {
	if !On {
		return 0
	}
	return int64(time.Since(base))
}

// Mark records event ev of the entry at index idx on node (peer: the
// other node of a message, 0 for none), the first time only.
func Mark(node, peer uint64, ev string, idx uint64) {
	if On {
		MarkAt(node, peer, ev, idx, Now())
	}
}

// MarkAt is Mark with the time given (a Now taken earlier).
func MarkAt(node, peer uint64, ev string, idx uint64, t int64) {
	if !On {
		return
	}
	k := key{node, peer, ev, idx}
	mu.Lock()
	if _, ok := marks[k]; !ok {
		marks[k] = t
	}
	mu.Unlock()
}

// Reset forgets every mark.
func Reset() {
	mu.Lock()
	marks = map[key]int64{}
	mu.Unlock()
}

// Report returns, for every index a proposer submitted on the leader, the
// offset of each event from that submission, in µs (median and 90th
// percentile): the leader's events ("L ..."), those of the follower whose
// acknowledgement the leader stepped first ("F ..."), and the other
// follower's fsync ("F2 ...").
func Report() string {
	mu.Lock()
	defer mu.Unlock()
	type evs map[string]int64
	byIdx := map[uint64]map[uint64]map[uint64]evs{} // index, node, peer
	for k, t := range marks {
		if byIdx[k.idx] == nil {
			byIdx[k.idx] = map[uint64]map[uint64]evs{}
		}
		if byIdx[k.idx][k.node] == nil {
			byIdx[k.idx][k.node] = map[uint64]evs{}
		}
		if byIdx[k.idx][k.node][k.peer] == nil {
			byIdx[k.idx][k.node][k.peer] = evs{}
		}
		byIdx[k.idx][k.node][k.peer][k.ev] = t
	}
	offs := map[string][]float64{}
	add := func(name string, v int64) { offs[name] = append(offs[name], float64(v)/1e3) }
	n := 0
	for _, a := range byIdx {
		var lead uint64
		var t0 int64
		for node, b := range a {
			if e, ok := b[0]["P.submit"]; ok {
				lead, t0 = node, e
			}
		}
		if lead == 0 {
			continue
		}
		var fol uint64
		best := int64(1 << 62)
		for peer, e := range a[lead] {
			if t, ok := e["L.stepResp"]; ok && peer != 0 && t < best {
				fol, best = peer, t
			}
		}
		if fol == 0 || a[fol] == nil {
			continue
		}
		n++
		for peer, e := range a[lead] {
			if peer != 0 && peer != fol {
				continue
			}
			for ev, t := range e {
				add("L "+ev, t-t0)
			}
		}
		for peer, e := range a[fol] {
			if peer != 0 && peer != lead {
				continue
			}
			for ev, t := range e {
				add("F "+ev, t-t0)
			}
		}
		for node, b := range a {
			if node == lead || node == fol {
				continue
			}
			for _, ev := range []string{"F.saveStart", "F.saveEnd"} {
				if t, ok := b[0][ev]; ok {
					add("F2 "+ev, t-t0)
				}
			}
		}
	}
	type row struct {
		name     string
		p50, p90 float64
		count    int
	}
	var rows []row
	for name, v := range offs {
		if len(v) < n/2 {
			continue // a hop most commits did not take (an election's)
		}
		slices.Sort(v)
		rows = append(rows, row{name, v[len(v)/2], v[len(v)*9/10], len(v)})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].p50 < rows[j].p50 })
	var sb strings.Builder
	fmt.Fprintf(&sb, "hoptrace: %d commits\n%-28s %9s %9s %6s\n", n, "event", "p50µs", "p90µs", "n")
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-28s %9.1f %9.1f %6d\n", r.name, r.p50, r.p90, r.count)
	}
	return sb.String()
}
