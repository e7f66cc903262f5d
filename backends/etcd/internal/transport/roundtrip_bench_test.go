package transport

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// BenchmarkRoundTrip measures the transport alone, without a disk: node a's
// loop sends a MsgApp to b, b's loop answers with a MsgAppResp, and a's loop
// waits for it, as a leader and a follower exchange an append (each loop is
// a goroutine reading what Deliver hands it, like the etcd backend's raft
// loop). It reports the round trip's p50 and p99 in microseconds.
//
// With syscall=100us each loop also spends 100 µs in a blocking system call
// where the etcd backend's loop calls fdatasync: the leader's after its
// Send, the follower's before its answer. The loop's thread then holds its
// processor in the system call, which is where the hand-offs between
// goroutines cost the most (docs/benchmarks.md, "Where an etcd commit's
// time goes at one client").
func BenchmarkRoundTrip(b *testing.B) {
	for _, block := range []time.Duration{0, 100 * time.Microsecond} {
		b.Run(fmt.Sprintf("syscall=%v", block), func(b *testing.B) { benchRoundTrip(b, block) })
	}
}

// blockIn spends d in one blocking system call (select(2) with a timeout),
// holding the calling thread as fdatasync does; nothing when d is zero.
func blockIn(d time.Duration) {
	if d > 0 {
		tv := syscall.NsecToTimeval(d.Nanoseconds())
		_, _ = syscall.Select(0, nil, nil, nil, &tv)
	}
}

func benchRoundTrip(b *testing.B, block time.Duration) {
	aIn := make(chan *pb.Message, 64)
	bIn := make(chan *pb.Message, 64)
	deliverTo := func(ch chan *pb.Message) func(context.Context, Sender, []*pb.Message) error {
		return func(ctx context.Context, _ Sender, msgs []*pb.Message) error {
			for _, m := range msgs {
				select {
				case ch <- m:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}
	}
	ta, err := New(Config{NodeID: 1, ID: "a", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: deliverTo(aIn)})
	if err != nil {
		b.Fatal(err)
	}
	defer ta.Close()
	tb, err := New(Config{NodeID: 2, ID: "b", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: deliverTo(bIn)})
	if err != nil {
		b.Fatal(err)
	}
	defer tb.Close()
	ta.SetPeer(2, tb.Addr().String())
	tb.SetPeer(1, ta.Addr().String())
	done := make(chan struct{})
	defer close(done)
	go func() { // b's loop
		for {
			select {
			case m := <-bIn:
				blockIn(block)
				tb.Send(&pb.Message{Type: pb.MsgAppResp.Enum(), To: new(uint64(1)), From: new(uint64(2)), Index: m.Index})
			case <-done:
				return
			}
		}
	}()
	entry := &pb.Entry{Term: new(uint64(1)), Type: pb.EntryNormal.Enum(), Data: make([]byte, 100)}
	roundTrip := func(i uint64) time.Duration {
		start := time.Now()
		entry.Index = new(i)
		ta.Send(&pb.Message{Type: pb.MsgApp.Enum(), To: new(uint64(2)), From: new(uint64(1)), Index: new(i), Entries: []*pb.Entry{entry}})
		blockIn(block)
		select {
		case <-aIn:
		case <-time.After(10 * time.Second):
			b.Fatal("no answer")
		}
		return time.Since(start)
	}
	for i := range 100 { // open both streams
		roundTrip(uint64(i))
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		lat = append(lat, roundTrip(uint64(i+100)))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
