package core_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/ticketd/ticketd/core"
)

// benchSizes are the lock-table sizes of the benchmarks: 10k, a typical
// service's table, and 1M, the scale docs/benchmarks.md measures.
var benchSizes = []struct {
	name  string
	locks int
}{
	{"locks_10k", 10_000},
	{"locks_1M", 1_000_000},
}

// benchTables caches one populated state machine per size: building a million
// locks takes a while and every b.Run calls its function several times.
var benchTables = map[int]*core.StateMachine{}

// benchTable returns a state machine holding n locks ("k0000000"...), applied
// at indexes 1..n, so tokens are 1..n.
func benchTable(b *testing.B, n int) *core.StateMachine {
	b.Helper()
	if sm, ok := benchTables[n]; ok {
		return sm
	}
	sm := core.NewStateMachine()
	for i := range n {
		if _, err := sm.Apply(uint64(i+1), core.Grant(fmt.Sprintf("k%07d", i), 10_000, "owner")); err != nil {
			b.Fatal(err)
		}
	}
	benchTables[n] = sm
	return sm
}

// benchKeys are keys that are not in a bench table and spread across it, so
// each grant walks the tree to a leaf amid existing keys.
func benchKeys(n int) []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%07d/x", (i*7919)%n)
	}
	return keys
}

// BenchmarkApply measures one Apply (a Grant or a Release, alternating) on a
// table that already holds 10k or 1M locks. Each grant takes a free key and the
// release that follows frees it again, so the table size stays constant.
func BenchmarkApply(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			sm := benchTable(b, size.locks)
			keys := benchKeys(size.locks)
			index := sm.AppliedIndex()
			var token uint64
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				key := keys[(i/2)%len(keys)]
				index++
				if i%2 == 0 {
					res, err := sm.Apply(index, core.Grant(key, 10_000, "bench"))
					if err != nil || res.Outcome != core.OutcomeGranted {
						b.Fatalf("grant %q: %v %v", key, res, err)
					}
					token = res.Token
					continue
				}
				if res, err := sm.Apply(index, core.Release(key, token)); err != nil || res.Outcome != core.OutcomeReleased {
					b.Fatalf("release %q: %v %v", key, res, err)
				}
			}
			b.StopTimer()
			if b.N%2 == 1 { // leave the table as it was for the next run
				if _, err := sm.Apply(index+1, core.Release(keys[(b.N/2)%len(keys)], token)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplyEntry is BenchmarkApply with decoding: each op is one
// ApplyEntry of a pre-encoded Grant or Release on a table of 10k locks.
func BenchmarkApplyEntry(b *testing.B) {
	sm := benchTable(b, benchSizes[0].locks)
	keys := benchKeys(benchSizes[0].locks)
	// The grant of cycle j gets token LastToken()+j+1, so the releases can be
	// encoded before the timer starts.
	entries := make([][]byte, 0, b.N+1)
	next := sm.LastToken()
	for j := 0; len(entries) < b.N; j++ {
		key := keys[j%len(keys)]
		next++
		for _, c := range []core.Command{core.Grant(key, 10_000, "bench"), core.Release(key, next)} {
			data, err := core.Encode(c)
			if err != nil {
				b.Fatal(err)
			}
			entries = append(entries, data)
		}
	}
	index := sm.AppliedIndex()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		index++
		if _, res, err := sm.ApplyEntry(index, entries[i]); err != nil || res.Outcome == core.OutcomeNotFound {
			b.Fatalf("entry %d: %v %v", i, res, err)
		}
	}
	b.StopTimer()
	if b.N%2 == 1 { // leave the table as it was for the next run
		last, _ := core.Decode(entries[b.N-1])
		index++
		if _, err := sm.Apply(index, core.Release(last.Key, sm.LastToken())); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode measures Encode of a typical Grant.
func BenchmarkEncode(b *testing.B) {
	cmd := core.Grant("orders/42/payment", 10_000, "worker-7f3a9c")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := core.Encode(cmd); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode measures Decode of a typical Grant.
func BenchmarkDecode(b *testing.B) {
	data, err := core.Encode(core.Grant("orders/42/payment", 10_000, "worker-7f3a9c"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := core.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshot measures taking a snapshot and writing it to io.Discard;
// MB/s is snapshot bytes per second.
func BenchmarkSnapshot(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			sm := benchTable(b, size.locks)
			n, err := sm.Snapshot().WriteTo(io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := sm.Snapshot().WriteTo(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRestore measures Restore of a snapshot of 10k or 1M locks; MB/s is
// snapshot bytes per second.
func BenchmarkRestore(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			var buf bytes.Buffer
			if _, err := benchTable(b, size.locks).Snapshot().WriteTo(&buf); err != nil {
				b.Fatal(err)
			}
			data := buf.Bytes()
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			sm := core.NewStateMachine()
			for b.Loop() {
				if err := sm.Restore(bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
