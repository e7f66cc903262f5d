package hashicorp_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/core"
)

// rpcBound is the hashicorp transport's bound on one request with the
// default Config.MaxMessageBytes (rpcMessageBytes: 512 entries × 4 KiB × 2).
const rpcBound = 4 << 20

func totalAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestRPCBoundCapsDecodeCost (docs/security.md#peer-transport-bounds): with
// the default MaxMessageBytes (64 MiB), a request that msgpack decodes is
// bounded at 4 MiB, not 64 MiB. A complete request just under the bound
// costs the follower a bounded amount of allocation (go-msgpack copies a
// growing []byte, so the cost grows with the square of the size: 63 MiB
// cost 6.3 s of CPU and 500 MB) and the leader keeps its term; a request
// declaring a 100 MiB field is cut at the declaration, allocating almost
// nothing however much is sent.
func TestRPCBoundCapsDecodeCost(t *testing.T) {
	obs := newPeerErrors()
	c := backendtest.NewCluster(t, newNode)
	c.Tune = func(cfg *backends.Config) { cfg.Observer = obs }
	c.Start(3)
	l := c.WaitLeader()
	term := l.Node().Status().Term
	var f *backendtest.Peer
	for _, p := range c.Live() {
		if p != l {
			f = p
			break
		}
	}

	t.Run("request_at_the_bound", func(t *testing.T) {
		req := &raft.AppendEntriesRequest{
			RPCHeader:    header(l.ID, l.Addr),
			Term:         term,
			PrevLogEntry: 1 << 40, // never matches: nothing is appended
			PrevLogTerm:  term,
			Entries:      []*raft.Log{{Index: 1<<40 + 1, Term: term, Type: raft.LogCommand, Data: bytes.Repeat([]byte("x"), rpcBound-64<<10)}},
		}
		var buf bytes.Buffer
		buf.WriteByte(0) // rpcAppendEntries
		if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(req); err != nil {
			t.Fatal(err)
		}
		conn, err := net.Dial("tcp", f.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		before := totalAlloc()
		_ = conn.SetDeadline(time.Now().Add(backendtest.WaitTimeout))
		if _, err := conn.Write(buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		// The follower answers (a rejection): the request was decoded whole.
		if _, err := conn.Read(make([]byte, 64)); err != nil {
			t.Fatalf("no answer to a request under the bound: %v", err)
		}
		grew := totalAlloc() - before
		t.Logf("a %d-byte request cost %d bytes of allocation", buf.Len(), grew)
		if grew > 96<<20 {
			t.Errorf("decoding a request at the bound allocated %d bytes", grew)
		}
	})

	t.Run("hundred_mib_body_cut_at_declaration", func(t *testing.T) {
		conn, err := net.Dial("tcp", f.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		before := totalAlloc()
		_ = conn.SetWriteDeadline(time.Now().Add(backendtest.WaitTimeout))
		_, err = conn.Write(declaredAppendEntries(t, l.ID, l.Addr, term, 100<<20))
		chunk := make([]byte, 256<<10)
		sent := 0
		for ; err == nil && sent < 100<<20; sent += len(chunk) {
			_, err = conn.Write(chunk)
		}
		waitFor(t, "oversize counted", func() bool { return obs.count("oversize") > 0 })
		grew := totalAlloc() - before
		t.Logf("cut after at most %d bytes sent (%v); %d bytes allocated", sent, err, grew)
		if grew > 16<<20 {
			t.Errorf("refusing a 100 MiB field allocated %d bytes", grew)
		}
	})

	ctx := t.Context()
	if _, err := c.Propose(ctx, core.Grant("after", 60_000, "o")); err != nil {
		t.Fatalf("propose after: %v", err)
	}
	c.WaitApplied(l.StateMachine().AppliedIndex())
	if got := l.Node().Status().Term; got != term || c.Leader() != l {
		t.Errorf("leadership changed: term %d -> %d", term, got)
	}
}

// TestSnapshotLargerThanRPCBound: InstallSnapshot's data has its own bound
// (Config.MaxMessageBytes), so a snapshot larger than the 4 MiB request
// bound still reaches a node that joins after the log was compacted.
func TestSnapshotLargerThanRPCBound(t *testing.T) {
	c := backendtest.NewCluster(t, newNode)
	c.Tune = func(cfg *backends.Config) {
		cfg.SnapshotThreshold = 512
		cfg.TrailingLogs = 16
	}
	c.Start(1)
	l := c.WaitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 2*backendtest.WaitTimeout)
	defer cancel()
	// 6,000 locks with 1 KiB keys: a snapshot of over 6 MiB.
	const locks, workers = 6000, 32
	pad := string(bytes.Repeat([]byte("k"), core.MaxKeyBytes-16))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < locks; i += workers {
				if _, err := l.Node().Propose(ctx, core.Grant(fmt.Sprintf("%s-%08d", pad, i), 600_000, "o")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("propose: %v", err)
	}
	var snap bytes.Buffer
	if err := l.StateMachine().WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if snap.Len() <= rpcBound {
		t.Fatalf("snapshot of %d bytes is not larger than the request bound", snap.Len())
	}
	joiner := c.Join()
	if err := c.OnLeader(ctx, func(ctx context.Context, n backendtest.Node) error { return n.AddVoter(ctx, joiner.Member()) }); err != nil {
		t.Fatalf("add voter: %v", err)
	}
	c.WaitApplied(l.StateMachine().AppliedIndex(), joiner)
	c.EnsureSame()
	t.Logf("snapshot of %d bytes installed on the joiner", snap.Len())
}
