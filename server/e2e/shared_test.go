package e2e_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// This file drives shared locks, semaphores and sessions through
// the Go SDK and ticketctl against real clusters.

// sdkClient returns an SDK client for every node of c, closed when the test
// ends.
func sdkClient(t *testing.T, c *ticketdtest.Cluster, opts ...sdk.Option) *sdk.Client {
	t.Helper()
	var eps []string
	for i := range c.Len() {
		eps = append(eps, c.Node(i).APIAddr)
	}
	cl, err := sdk.New(eps, append([]sdk.Option{sdk.WithBackoff(20*time.Millisecond, 200*time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// TestShared runs the SDK's readers-writer, semaphore and default-session
// recipes against one cluster per backend.
func TestShared(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		t.Run("readers_then_writer", func(t *testing.T) { testReadersThenWriter(t, c) })
		t.Run("semaphore_never_overfull", func(t *testing.T) { testSemaphoreNeverOverfull(t, c) })
		t.Run("default_session_lost", func(t *testing.T) { testDefaultSessionLost(t, c) })
		t.Run("session_survives_failover", func(t *testing.T) { testSessionSurvivesFailover(t, c) })
	})
}

// testSessionSurvivesFailover: the default session's keep-alives follow
// two leader changes, so its locks stay held (and their Leases open) for
// well over the session's TTL.
func testSessionSurvivesFailover(t *testing.T, c *ticketdtest.Cluster) {
	const ttl = 2 * time.Second
	cl := sdkClient(t, c, sdk.WithSessionTTL(ttl))
	ctx := ctxT(t)
	l, err := cl.RLock(ctx, "failover/a")
	require.NoError(t, err)
	start := time.Now()
	for range 2 {
		_, err := c.Cluster(c.Leader(t)).TransferLeader(ctx, &ticketv1.TransferLeaderRequest{})
		require.NoError(t, err)
		c.WaitLeader(t, safety)
	}
	for time.Since(start) < 2*ttl { // outlive the TTL twice over
		select {
		case <-l.Done():
			t.Fatalf("lease lost across leader changes: %v", l.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	valid, _, err := cl.Check(ctx, "failover/a", l.Token())
	require.NoError(t, err)
	assert.True(t, valid, "the servers still hold the lock")
	require.NoError(t, l.Unlock(ctx))
}

// testReadersThenWriter: three RLock holders at once, each with its own
// token; a Lock waits until every one of them has unlocked; an RLock that
// queues behind the waiting writer is served only after the writer.
func testReadersThenWriter(t *testing.T, c *ticketdtest.Cluster) {
	cl := sdkClient(t, c)
	ctx := ctxT(t)
	const key = "rw/data"

	var readers []*sdk.Lease
	for range 3 {
		l, err := cl.RLock(ctx, key)
		require.NoError(t, err)
		readers = append(readers, l)
	}
	info, err := cl.GetLock(ctx, key)
	require.NoError(t, err)
	require.Equal(t, sdk.ModeShared, info.Mode)
	require.Len(t, info.Holders, 3, "three shared holders at once")
	for i, h := range info.Holders {
		assert.Equal(t, readers[i].Token(), h.Token, "holders in token order")
		assert.Equal(t, readers[i].Session().ID(), h.Session)
		valid, _, err := cl.Check(ctx, key, h.Token)
		require.NoError(t, err)
		assert.True(t, valid, "every shared holder's token is valid")
	}

	writer := make(chan *sdk.Lease, 1)
	go func() {
		l, err := cl.Lock(ctx, key, 0)
		assert.NoError(t, err)
		writer <- l
	}()
	leader := c.Leader(t)
	waitWaiters(t, c, leader, 1)
	late := make(chan *sdk.Lease, 1)
	go func() {
		l, err := cl.RLock(ctx, key)
		assert.NoError(t, err)
		late <- l
	}()
	waitWaiters(t, c, leader, 2)

	for i, r := range readers {
		select {
		case w := <-writer:
			t.Fatalf("Lock returned token %d while %d readers held the key", w.Token(), len(readers)-i)
		default:
		}
		require.NoError(t, r.Unlock(ctx))
	}
	w := <-writer
	require.NotNil(t, w)
	assert.Greater(t, w.Token(), readers[2].Token())
	info, err = cl.GetLock(ctx, key)
	require.NoError(t, err)
	require.Len(t, info.Holders, 1, "the writer holds alone: the later reader waits behind it")
	assert.Equal(t, w.Token(), info.Token)
	assert.Equal(t, sdk.ModeExclusive, info.Mode)
	select {
	case l := <-late:
		t.Fatalf("a reader queued behind the writer got token %d while the writer held", l.Token())
	default:
	}
	require.NoError(t, w.Unlock(ctx))
	l := <-late
	require.NotNil(t, l)
	assert.Greater(t, l.Token(), w.Token())
	require.NoError(t, l.Unlock(ctx))
}

// testSemaphoreNeverOverfull: four goroutines take slots of a 2-slot
// semaphore in turn; the cluster never lists more than two holders, each
// holder's token checks valid, and locally no more than two hold at once.
func testSemaphoreNeverOverfull(t *testing.T, c *ticketdtest.Cluster) {
	cl := sdkClient(t, c)
	ctx := ctxT(t)
	const key = "sem/pool"
	var (
		wg         sync.WaitGroup
		inside     atomic.Int32
		most       atomic.Int32
		mu         sync.Mutex
		tokens     []uint64
		mostListed int
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				l, err := cl.Semaphore(key, 2).Acquire(ctx)
				if !assert.NoError(t, err) {
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				info, err := cl.GetLock(ctx, key)
				if assert.NoError(t, err) {
					assert.Equal(t, uint32(2), info.Limit)
					_, mine := info.HolderOf(l.Owner())
					assert.True(t, mine, "the holder is listed")
					mu.Lock()
					mostListed = max(mostListed, len(info.Holders))
					mu.Unlock()
				}
				valid, _, err := cl.Check(ctx, key, l.Token())
				if assert.NoError(t, err) {
					assert.True(t, valid)
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				inside.Add(-1)
				assert.NoError(t, l.Unlock(ctx))
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, int(most.Load()), 2, "at most two holders at once")
	assert.LessOrEqual(t, mostListed, 2, "the cluster never listed more than two holders")
	assert.Len(t, tokens, 12)
	seen := map[uint64]bool{}
	for _, tok := range tokens {
		assert.False(t, seen[tok], "every holder has its own token")
		seen[tok] = true
	}
	l, err := cl.Semaphore(key, 3).TryAcquire(ctx)
	require.NoError(t, err, "a free key takes any limit")
	require.NoError(t, l.Unlock(ctx))
}

// failKeepAlive is a connect interceptor that, once cut, fails every
// KeepAlive locally with Unavailable, as if the client were paused or cut
// off from the cluster: its default session's lease then runs out.
// failKeepAlive fails a client's session keep-alives once cut is set: the
// unary KeepAlive calls and every send and receive on a KeepAliveStream
// (the SDK's way; docs/api.md#keepalivestream), as a client cut off from
// the cluster sees them.
type failKeepAlive struct{ cut atomic.Bool }

var errKeepAliveCut = connect.NewError(connect.CodeUnavailable, errors.New("test: keepalive cut"))

func (f *failKeepAlive) interceptor() connect.Interceptor { return f }

func (f *failKeepAlive) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if f.cut.Load() && strings.HasSuffix(req.Spec().Procedure, "/KeepAlive") {
			return nil, errKeepAliveCut
		}
		return next(ctx, req)
	}
}

func (f *failKeepAlive) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if !strings.HasSuffix(spec.Procedure, "/KeepAliveStream") {
			return conn
		}
		return &cutStream{StreamingClientConn: conn, cut: &f.cut}
	}
}

func (f *failKeepAlive) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// cutStream is a KeepAliveStream whose sends and receives fail once cut.
type cutStream struct {
	connect.StreamingClientConn
	cut *atomic.Bool
}

func (s *cutStream) Send(m any) error {
	if s.cut.Load() {
		return errKeepAliveCut
	}
	return s.StreamingClientConn.Send(m)
}

func (s *cutStream) Receive(m any) error {
	if s.cut.Load() {
		return errKeepAliveCut
	}
	return s.StreamingClientConn.Receive(m)
}

// testDefaultSessionLost: a client holds three locks under its default
// session; its keep-alives stop; its leases' Done close (before the
// servers remove anything), then the servers end the session and release
// all three locks in one committed entry (one index in Watch).
func testDefaultSessionLost(t *testing.T, c *ticketdtest.Cluster) {
	const ttl = 2 * time.Second
	fk := &failKeepAlive{}
	cl := sdkClient(t, c, sdk.WithSessionTTL(ttl), sdk.WithConnectOptions(connect.WithInterceptors(fk.interceptor())))
	obs := sdkClient(t, c)
	ctx := ctxT(t)

	a, err := cl.RLock(ctx, "sess/a")
	require.NoError(t, err)
	b, err := cl.Lock(ctx, "sess/b", 0)
	require.NoError(t, err)
	s, err := cl.Semaphore("sess/c", 3).Acquire(ctx)
	require.NoError(t, err)
	sess := a.Session()
	require.NotNil(t, sess)
	for _, l := range []*sdk.Lease{b, s} {
		require.Same(t, sess, l.Session(), "one default session for every lock of the client")
	}

	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	ended := make(chan sdk.Event, 8)
	listed := make(chan struct{})
	go func() {
		existing := 0
		for ev, err := range obs.Watch(wctx, "sess/", sdk.WithExisting()) {
			if err != nil {
				return
			}
			if ev.Existing {
				if existing++; existing == 3 {
					close(listed)
				}
			}
			if ev.Type == sdk.EventReleased || ev.Type == sdk.EventExpired {
				ended <- ev
			}
		}
	}()
	select { // the watch has started: it will see the end
	case <-listed:
	case <-time.After(safety):
		t.Fatal("the watch did not list the three locks")
	}

	fk.cut.Store(true)
	for _, l := range []*sdk.Lease{a, b, s} {
		select {
		case <-l.Done():
		case <-time.After(safety):
			t.Fatalf("lease of %s still held %v after its keep-alives were cut", l.Key(), safety)
		}
		assert.ErrorIs(t, l.Err(), sdk.ErrLeaseLost)
	}
	got, err := obs.GetLock(ctx, "sess/a")
	require.NoError(t, err)
	assert.True(t, got.Held, "the servers ended the session before the client's Done closed")

	var evs []sdk.Event
	for range 3 {
		select {
		case ev := <-ended:
			evs = append(evs, ev)
		case <-time.After(safety):
			t.Fatalf("the session's locks were not released; got %v", evs)
		}
	}
	for _, ev := range evs {
		assert.Equal(t, sdk.EventExpired, ev.Type, "%+v", ev)
		assert.Equal(t, evs[0].Index, ev.Index, "every lock of the session ends in one entry")
		assert.Equal(t, sess.ID(), ev.Session)
	}
	for _, k := range []string{"sess/a", "sess/b", "sess/c"} {
		info, err := obs.GetLock(ctx, k)
		require.NoError(t, err)
		assert.False(t, info.Held, k)
	}

	fk.cut.Store(false)
	l, err := cl.RLock(ctx, "sess/a")
	require.NoError(t, err, "the next lock opens a new default session")
	assert.NotEqual(t, sess.ID(), l.Session().ID())
	require.NoError(t, cl.Close())
	assert.ErrorIs(t, l.Err(), sdk.ErrReleased, "Close closes the default session")
	info, err := obs.GetLock(ctx, "sess/a")
	require.NoError(t, err)
	assert.False(t, info.Held, "closing the session released its lock")
}

// TestLockRunLimit: "lock run --limit 2 --wait" started three times runs at
// most two copies of the command at once (and two do run together), and
// every copy runs.
func TestLockRunLimit(t *testing.T) {
	t.Parallel() // one backend, its own cluster: beside the others (see matrix)
	c := start(t, backends()[0])
	dir := t.TempDir()
	running := filepath.Join(dir, "running")
	require.NoError(t, os.Mkdir(running, 0o755))
	seen := filepath.Join(dir, "seen")
	// Each copy marks itself running, waits (up to 15 looks) until it sees a
	// second copy running, records how many copies it sees, stays a while,
	// and unmarks itself. A third copy running beside two would record 3;
	// copies that could never run two at once would all record 1.
	count := `n=$(ls ` + running + ` | wc -l)`
	script := `touch ` + running + `/$$; i=0; ` + count + `; while [ $n -lt 2 ] && [ $i -lt 15 ]; do sleep 0.1; i=$((i+1)); ` + count +
		`; done; echo $n >> ` + seen + `; sleep 0.5; rm ` + running + `/$$`
	var cmds []func() int
	for range 3 {
		cmd, _, stderr := ctlCmd(t, c, "--timeout", "60s", "lock", "run", "run/limit", "--limit", "2", "--wait", "--ttl", "5s", "--", "sh", "-c", script)
		require.NoError(t, cmd.Start())
		cmds = append(cmds, func() int {
			err := cmd.Wait()
			var ee interface{ ExitCode() int }
			if errors.As(err, &ee) {
				t.Logf("stderr: %s", stderr)
				return ee.ExitCode()
			}
			require.NoError(t, err)
			return 0
		})
	}
	for _, wait := range cmds {
		assert.Equal(t, 0, wait())
	}

	b, err := os.ReadFile(seen)
	require.NoError(t, err)
	counts := strings.Fields(string(b))
	require.Len(t, counts, 3, "every copy ran")
	most := 0
	for _, s := range counts {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		most = max(most, n)
	}
	assert.Equal(t, 2, most, "at most two copies at once, and two did run together: %v", counts)
	requireFree(t, c, "run/limit")

	// A different limit on the same key while it is held is refused.
	hold, _, _ := ctlCmd(t, c, "lock", "run", "run/limit", "--limit", "2", "--", "sleep", "30")
	require.NoError(t, hold.Start())
	eventually(t, func() bool {
		got, err := c.Lock(c.Leader(t)).GetLock(ctxT(t), &ticketv1.GetLockRequest{Key: "run/limit"})
		return err == nil && got.GetHeld()
	}, "the holder runs")
	cmd, _, stderr := ctlCmd(t, c, "lock", "run", "run/limit", "--limit", "3", "--", "true")
	assert.Equal(t, 1, exitCode(t, cmd))
	assert.Contains(t, stderr.String(), "failed_precondition")
	_ = hold.Process.Kill()
}
