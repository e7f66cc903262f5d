package core_test

import (
	"bytes"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/ticketd/ticketd/core"
)

// scaleTables caches the tables of BenchmarkSnapshotCodec by name.
var scaleTables = map[string]*core.StateMachine{}

// scaleTable returns a state machine shaped like the one `ticketbench
// -workloads scale` fills (docs/benchmarks.md#scale-a-million-locks):
// locks exclusive locks "scale/lock/%08d" and sessions sessions of
// perSession locks "scale/session/%06d/%04d" each, with owner ids of the
// SDK's form ("host/pid/random-seq", about 35 bytes) and 24-hour leases.
func scaleTable(b *testing.B, locks, sessions, perSession int) *core.StateMachine {
	b.Helper()
	name := fmt.Sprintf("%d/%dx%d", locks, sessions, perSession)
	if sm, ok := scaleTables[name]; ok {
		return sm
	}
	const lease = 24 * 60 * 60 * 1000
	sm := core.NewStateMachine()
	index := uint64(0)
	apply := func(cmd core.Command) {
		index++
		if _, err := sm.Apply(index, cmd); err != nil {
			b.Fatal(err)
		}
	}
	for i := range locks {
		apply(core.Grant(fmt.Sprintf("scale/lock/%08d", i), lease, fmt.Sprintf("bench-host/4242/5f2a9c1e7b3d-%d", i)))
	}
	for j := range sessions {
		apply(core.CreateSession(lease))
		id := index
		for k := range perSession {
			apply(core.Grant(fmt.Sprintf("scale/session/%06d/%04d", j, k), lease,
				fmt.Sprintf("bench-host/4242/5f2a9c1e7b3d-s%d", j*perSession+k)).WithSession(id))
		}
	}
	scaleTables[name] = sm
	return sm
}

// cpuTime is this process's user and system CPU time: under a shared
// machine's load, CPU per operation moves less than wall time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSnapshotCodec measures writing a snapshot (Snapshot.WriteTo
// into io.Discard), restoring one (StateMachine.Restore, which decodes,
// verifies and builds the table) and checking one (CheckSnapshot, what
// `ticketctl snapshot save` and `ticketd restore` verify) of scale-shaped
// tables: 100k and 1M
// exclusive locks, and 1M plus 10k sessions × 100 locks (the scale
// workload's last step). MB/s is snapshot bytes per second of wall time;
// cpu-ms/op is the process's CPU time per operation (garbage collection
// included).
func BenchmarkSnapshotCodec(b *testing.B) {
	tables := []struct {
		name                       string
		locks, sessions, perSesion int
	}{
		{"locks_100k", 100_000, 0, 0},
		{"locks_1M", 1_000_000, 0, 0},
		{"locks_1M+10kx100", 1_000_000, 10_000, 100},
	}
	for _, tb := range tables {
		b.Run("encode/"+tb.name, func(b *testing.B) {
			sm := scaleTable(b, tb.locks, tb.sessions, tb.perSesion)
			n, err := sm.Snapshot().WriteTo(io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			timeOp(b, n, func() error {
				_, err := sm.Snapshot().WriteTo(io.Discard)
				return err
			})
		})
		b.Run("decode/"+tb.name, func(b *testing.B) {
			timeOnSnapshot(b, scaleTable(b, tb.locks, tb.sessions, tb.perSesion), func(data []byte) error {
				return core.NewStateMachine().Restore(bytes.NewReader(data))
			})
		})
		b.Run("check/"+tb.name, func(b *testing.B) {
			timeOnSnapshot(b, scaleTable(b, tb.locks, tb.sessions, tb.perSesion), func(data []byte) error {
				_, err := core.CheckSnapshot(data)
				return err
			})
		})
	}
}

// timeOnSnapshot times op on sm's snapshot bytes (timeOp).
func timeOnSnapshot(b *testing.B, sm *core.StateMachine, op func(data []byte) error) {
	var buf bytes.Buffer
	if _, err := sm.Snapshot().WriteTo(&buf); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	timeOp(b, int64(len(data)), func() error { return op(data) })
}

// timeOp times op over n snapshot bytes per call: MB/s of them,
// allocations and cpu-ms/op (cpuTime) per call.
func timeOp(b *testing.B, n int64, op func() error) {
	b.SetBytes(n)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime(b)
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-cpu).Milliseconds())/float64(b.N), "cpu-ms/op")
}
