package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// safety bounds every wait for an asynchronous effect; no assertion depends on it.
const safety = 30 * time.Second

// backends returns the backends to test: $TICKETD_TEST_BACKENDS
// (comma-separated) or both, "hashicorp,etcd".
func backends() []string {
	v := os.Getenv("TICKETD_TEST_BACKENDS")
	if v == "" {
		v = "hashicorp,etcd"
	}
	var out []string
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// matrix runs fn as one subtest per backend, the backends side by side and
// beside the other tests (every test here is parallel; up to go test's
// -parallel at once, parallelDefault unless given): each has its own
// cluster on its own ports and data dirs, and most of a test's time is
// spent waiting on timers (leases, elections), not on the CPU. It makes t parallel: the caller must
// not use t.Setenv, nor do anything after matrix returns (parallel subtests
// start only once the calling test function has returned).
func matrix(t *testing.T, fn func(t *testing.T, backend string)) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// start starts a three-node cluster of backend with a 10 ms lease floor and
// waits until it has settled (every member's API address recorded).
func start(t *testing.T, backend string, args ...string) *ticketdtest.Cluster {
	t.Helper()
	c := ticketdtest.Start(t, ticketdtest.Options{
		Backend: backend,
		Args:    append([]string{"--lease-min-ms=10", "--lease-max-ms=120000"}, args...),
	})
	settle(t, c)
	return c
}

// settle waits until the leader knows every member's API address, has
// applied everything it committed (so nothing is proposed in the background
// any more), and the term has stayed the same for a full election timeout
// (elections right after a bootstrap on a loaded machine are not the subject
// of most tests).
func settle(t *testing.T, c *ticketdtest.Cluster) {
	t.Helper()
	var term uint64
	var since time.Time
	eventually(t, func() bool {
		st, err := c.Status(c.Leader(t))
		if err != nil || st.GetAppliedIndex() != st.GetCommitIndex() || len(st.GetMembers()) != c.Len() {
			return false
		}
		for _, m := range st.GetMembers() {
			if m.GetApiAddr() == "" {
				return false
			}
		}
		if st.GetTerm() != term {
			term, since = st.GetTerm(), time.Now()
			return false
		}
		return time.Since(since) >= time.Second
	}, "cluster settles")
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*safety)
	t.Cleanup(cancel)
	return ctx
}

func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(safety)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// follower returns a running node other than the leader.
func follower(t *testing.T, c *ticketdtest.Cluster) int {
	t.Helper()
	l := c.Leader(t)
	for _, i := range c.Running() {
		if i != l {
			return i
		}
	}
	t.Fatal("no follower")
	return -1
}

// view is the part of Status that any change to the lock table moves.
type view struct {
	LastToken    uint64
	LocksHeld    int64
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
}

func status(t *testing.T, c *ticketdtest.Cluster, i int) view {
	t.Helper()
	st, err := c.Status(i)
	require.NoError(t, err)
	return view{st.GetLastToken(), st.GetLocksHeld(), st.GetTerm(), st.GetCommitIndex(), st.GetAppliedIndex()}
}

// requireUnchanged checks that nothing was written between two views: the
// lock table is the same and, unless an election intervened (a new leader
// appends entries of its own), the log did not grow.
func requireUnchanged(t *testing.T, before, after view) {
	t.Helper()
	require.Equal(t, before.LastToken, after.LastToken, "last_token moved: %+v -> %+v", before, after)
	require.Equal(t, before.LocksHeld, after.LocksHeld, "locks_held moved: %+v -> %+v", before, after)
	if before.Term == after.Term {
		require.Equal(t, before.CommitIndex, after.CommitIndex, "the log grew: %+v -> %+v", before, after)
	} else {
		t.Logf("an election intervened (term %d -> %d); log growth not checked", before.Term, after.Term)
	}
}

func requireCode(t *testing.T, want connect.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want.String(), connect.CodeOf(err).String(), "error: %v", err)
}

// postJSON sends a Connect unary request with a JSON body to node addr and
// returns the HTTP status and the decoded JSON body.
func postJSON(t *testing.T, addr, procedure, body string) (int, map[string]any) {
	t.Helper()
	res, err := http.Post("http://"+addr+procedure, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer res.Body.Close()
	var out map[string]any
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(res.Body)
	require.NoError(t, json.Unmarshal(buf.Bytes(), &out), "body %q", buf.String())
	return res.StatusCode, out
}

// metric reads one sample (name with its labels, exactly as exposed) from
// node i's /metrics; 0 when absent (a labelled counter not yet incremented).
func metric(t *testing.T, c *ticketdtest.Cluster, i int, name string) float64 {
	t.Helper()
	v, err := c.Metric(i, name)
	if errors.Is(err, ticketdtest.ErrNoMetric) {
		return 0
	}
	require.NoError(t, err)
	return v
}

func waitWaiters(t *testing.T, c *ticketdtest.Cluster, i, n int) {
	t.Helper()
	eventually(t, func() bool { return metric(t, c, i, "ticketd_waiters") == float64(n) }, fmt.Sprintf("%d waiters", n))
}

type acquired struct {
	name string
	res  *ticketv1.AcquireResponse
	err  error
	at   time.Time // when the reply arrived
}

func recv(t *testing.T, ch <-chan acquired) acquired {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(safety):
		t.Fatal("no Acquire returned")
		return acquired{}
	}
}

func noReply(t *testing.T, ch <-chan acquired) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("unexpected reply to %s: %v %v", a.name, a.res, a.err)
	default:
	}
}
