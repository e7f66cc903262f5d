package e2e_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// grandchildScript is a command whose own child outlives a SIGTERM to the
// shell alone: it writes the background sleep's pid to file and waits.
func grandchildScript(file string) []string {
	return []string{"sh", "-c", `sleep 300 & echo $! > ` + file + `; wait`}
}

// requireGone waits until process pid no longer exists (killed and reaped).
func requireGone(t *testing.T, pid int) {
	t.Helper()
	eventually(t, func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}, "process "+strconv.Itoa(pid)+" is gone")
}

// killOnCleanup kills pid at the end of the test if it is still there, so
// that a failing test leaves no sleep behind.
func killOnCleanup(t *testing.T, pid int) {
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
}

// waitExit waits (bounded by safety) for cmd, started, and returns its exit code.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			return 0
		}
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		return ee.ExitCode()
	case <-time.After(safety):
		t.Fatal("ticketctl did not end")
		return -1
	}
}

// TestLockRunKillsProcessGroupOnForceRelease: an admin force-releases the
// lock while the command runs: the command's own child (a background sleep
// under sh) is terminated with it, and ticketctl exits 5.
func TestLockRunKillsProcessGroupOnForceRelease(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c := start(t, backends()[0])
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd, _, stderr := ctlCmd(t, c, append([]string{"lock", "run", "group/a", "--ttl", "1s", "--kill-timeout", "5s", "--"},
		grandchildScript(pidFile)...)...)
	require.NoError(t, cmd.Start())
	pid, err := strconv.Atoi(waitFile(t, pidFile))
	require.NoError(t, err)
	killOnCleanup(t, pid)
	_, err = c.Lock(c.Leader(t)).Release(ctxT(t), &ticketv1.ReleaseRequest{Key: "group/a", Force: true})
	require.NoError(t, err)
	assert.Equal(t, 5, waitExit(t, cmd), "stderr: %s", stderr)
	assert.Contains(t, stderr.String(), "lease lost")
	requireGone(t, pid)
}

// TestLockRunKillsProcessGroupOnSIGTERM: ticketctl itself gets SIGTERM:
// the command's child is terminated too, the lock is released, and
// ticketctl exits 143.
func TestLockRunKillsProcessGroupOnSIGTERM(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c := start(t, backends()[0])
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd, _, stderr := ctlCmd(t, c, append([]string{"lock", "run", "group/b", "--kill-timeout", "5s", "--"},
		grandchildScript(pidFile)...)...)
	require.NoError(t, cmd.Start())
	pid, err := strconv.Atoi(waitFile(t, pidFile))
	require.NoError(t, err)
	killOnCleanup(t, pid)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 143, waitExit(t, cmd), "stderr: %s", stderr)
	requireGone(t, pid)
	requireFree(t, c, "group/b")
}

// TestLockRunReapsLeftovers: the command exits 0 leaving a background
// process in its group: that process is terminated before the lock is
// released, and ticketctl exits with the command's status.
func TestLockRunReapsLeftovers(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c := start(t, backends()[0])
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd, _, stderr := ctlCmd(t, c, "lock", "run", "group/c", "--kill-timeout", "5s", "--",
		"sh", "-c", `sleep 300 & echo $! > `+pidFile+`; exit 3`)
	require.Equal(t, 3, exitCode(t, cmd), "stderr: %s", stderr)
	pid, err := strconv.Atoi(waitFile(t, pidFile))
	require.NoError(t, err)
	killOnCleanup(t, pid)
	requireGone(t, pid)
	requireFree(t, c, "group/c")
}

// TestLockRunEnvironment: the command gets TICKETD_KEY and
// TICKETD_FENCING_TOKEN; TICKETD_TOKEN, the bearer token, only with
// --pass-token, even when ticketctl's own environment has it.
func TestLockRunEnvironment(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c := start(t, backends()[0])
	dir := t.TempDir()
	for _, pass := range []bool{false, true} {
		envFile := filepath.Join(dir, "env-"+strconv.FormatBool(pass))
		args := []string{"lock", "run", "env/a"}
		if pass {
			args = append(args, "--pass-token")
		}
		cmd, _, stderr := ctlCmd(t, c, append(args, "--", "sh", "-c",
			`echo "$TICKETD_KEY|$TICKETD_FENCING_TOKEN|${TICKETD_TOKEN-unset}" > `+envFile)...)
		cmd.Env = append(os.Environ(), "TICKETD_TOKEN=bearer-0123456789")
		require.Equal(t, 0, exitCode(t, cmd), "stderr: %s", stderr)
		f := strings.Split(waitFile(t, envFile), "|")
		require.Len(t, f, 3)
		assert.Equal(t, "env/a", f[0])
		_, err := strconv.ParseUint(f[1], 10, 64)
		assert.NoError(t, err, "TICKETD_FENCING_TOKEN is the token")
		if pass {
			assert.Equal(t, "bearer-0123456789", f[2])
		} else {
			assert.Equal(t, "unset", f[2], "no bearer token without --pass-token")
		}
	}
}

// TestSessionRun: the command gets TICKETD_SESSION, an open session kept
// alive past its TTL while the command runs; closing the session from
// outside terminates the command's whole process group (exit 5); a command
// that exits closes its session.
func TestSessionRun(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c := start(t, backends()[0])
	dir := t.TempDir()
	sessFile, pidFile := filepath.Join(dir, "session"), filepath.Join(dir, "pid")
	cmd, _, stderr := ctlCmd(t, c, "session", "run", "--ttl", "1s", "--kill-timeout", "5s", "--",
		"sh", "-c", `echo "$TICKETD_SESSION" > `+sessFile+`; sleep 300 & echo $! > `+pidFile+`; wait`)
	require.NoError(t, cmd.Start())
	id, err := strconv.ParseUint(waitFile(t, sessFile), 10, 64)
	require.NoError(t, err)
	pid, err := strconv.Atoi(waitFile(t, pidFile))
	require.NoError(t, err)
	killOnCleanup(t, pid)
	lock := c.Lock(c.Leader(t))
	// Three TTLs later the session is still open: it is kept alive.
	time.Sleep(3 * time.Second)
	got, err := lock.GetSession(ctxT(t), &ticketv1.GetSessionRequest{Session: id})
	require.NoError(t, err, "stderr: %s", stderr)
	assert.Equal(t, int64(1000), got.GetSession().GetTtlMs())
	_, err = lock.CloseSession(ctxT(t), &ticketv1.CloseSessionRequest{Session: id})
	require.NoError(t, err)
	assert.Equal(t, 5, waitExit(t, cmd), "stderr: %s", stderr)
	requireGone(t, pid)

	cmd, _, stderr = ctlCmd(t, c, "session", "run", "--ttl", "5s", "--", "sh", "-c", `echo "$TICKETD_SESSION" > `+sessFile+`2`)
	require.Equal(t, 0, exitCode(t, cmd), "stderr: %s", stderr)
	id, err = strconv.ParseUint(waitFile(t, sessFile+"2"), 10, 64)
	require.NoError(t, err)
	_, err = lock.GetSession(ctxT(t), &ticketv1.GetSessionRequest{Session: id})
	require.Error(t, err, "the session is closed when the command exits")
}

// TestSessionListGet: "session list" and "session get" print the sessions
// and their locks in the API's JSON; --prefix keeps the sessions holding a
// lock under it; an unknown session exits 3.
func TestSessionListGet(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c := start(t, backends()[0])
	ctx := ctxT(t)
	lock := c.Lock(c.Leader(t))
	s1, err := lock.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
	require.NoError(t, err)
	s2, err := lock.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
	require.NoError(t, err)
	_, err = lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "jobs/x", Owner: "o1", Session: s2.GetSession()})
	require.NoError(t, err)

	cmd, out, stderr := ctlCmd(t, c, "-o", "json", "session", "list")
	require.Equal(t, 0, exitCode(t, cmd), "stderr: %s", stderr)
	var all struct {
		Sessions []struct {
			Session uint64 `json:"session,string"`
			TTLMs   int64  `json:"ttlMs,string"`
		} `json:"sessions"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &all), out.String())
	require.Len(t, all.Sessions, 2)
	assert.Equal(t, s1.GetSession(), all.Sessions[0].Session)
	assert.Equal(t, int64(60_000), all.Sessions[0].TTLMs)

	cmd, out, stderr = ctlCmd(t, c, "-o", "value", "session", "list", "--prefix", "jobs/")
	require.Equal(t, 0, exitCode(t, cmd), "stderr: %s", stderr)
	assert.Equal(t, strconv.FormatUint(s2.GetSession(), 10), strings.TrimSpace(out.String()))

	cmd, out, stderr = ctlCmd(t, c, "session", "get", strconv.FormatUint(s2.GetSession(), 10))
	require.Equal(t, 0, exitCode(t, cmd), "stderr: %s", stderr)
	assert.Contains(t, out.String(), "ttl 1m0s")
	assert.Contains(t, out.String(), `"jobs/x" token`)

	cmd, _, stderr = ctlCmd(t, c, "session", "get", "999999")
	assert.Equal(t, 3, exitCode(t, cmd), "an unknown session: %s", stderr)
}

// TestElectObserve: "elect --observe" prints the leader, then each change
// (no leader once it resigned), without campaigning itself.
func TestElectObserve(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c := start(t, backends()[0])
	obs, _, obsErr := ctlCmd(t, c, "-o", "json", "elect", "--observe", "el/a")
	obs.Stdout = nil
	pipe, err := obs.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, obs.Start())
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() map[string]string {
		t.Helper()
		select {
		case l, ok := <-lines:
			require.True(t, ok, "observer ended: %s", obsErr)
			var m map[string]string
			require.NoError(t, json.Unmarshal([]byte(l), &m), l)
			return m
		case <-time.After(safety):
			t.Fatalf("no leader printed; stderr: %s", obsErr)
			return nil
		}
	}
	ready := filepath.Join(t.TempDir(), "ready")
	leader, _, leaderErr := ctlCmd(t, c, "elect", "el/a", "v1", "--", "sh", "-c", `echo ok > `+ready+`; sleep 300`)
	require.NoError(t, leader.Start())
	waitFile(t, ready)
	// The observer may first print that nobody leads (the election before
	// the campaign); then the leader.
	m := next()
	for m["term"] == "0" {
		m = next()
	}
	assert.Equal(t, "v1", m["value"])
	require.NoError(t, leader.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 143, waitExit(t, leader), "stderr: %s", leaderErr)
	m = next()
	assert.Equal(t, "0", m["term"], "the leader resigned: no leader")
	got, err := c.Lock(c.Leader(t)).GetLock(ctxT(t), &ticketv1.GetLockRequest{Key: "el/a"})
	require.NoError(t, err)
	assert.False(t, got.GetHeld(), "the observer never campaigned")
	require.NoError(t, obs.Process.Signal(syscall.SIGINT))
	assert.Equal(t, 0, waitExit(t, obs), "stderr: %s", obsErr)
}
