package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

var (
	ctlOnce sync.Once
	ctlPath string
	ctlErr  error
)

// ticketctlBin builds the ticketctl binary once per test process.
func ticketctlBin(t *testing.T) string {
	t.Helper()
	ctlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ticketctl-e2e-")
		if err != nil {
			ctlErr = err
			return
		}
		ctlPath = filepath.Join(dir, "ticketctl")
		out, err := exec.Command("go", "build", "-o", ctlPath, "github.com/ticketd/ticketd/server/cmd/ticketctl").CombinedOutput()
		if err != nil {
			ctlErr = err
			t.Logf("%s", out)
		}
	})
	require.NoError(t, ctlErr)
	return ctlPath
}

// ctlCmd returns a ticketctl process against c's endpoints, not started.
func ctlCmd(t *testing.T, c *ticketdtest.Cluster, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	var eps []string
	for i := range c.Len() {
		eps = append(eps, c.Node(i).APIAddr)
	}
	cmd := exec.Command(ticketctlBin(t), append([]string{"--endpoints", strings.Join(eps, ",")}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, &stdout, &stderr
}

// exitCode runs cmd to completion and returns its exit code.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Run()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	return ee.ExitCode()
}

// waitFile waits for path to hold a line and returns it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	var s string
	eventually(t, func() bool {
		b, err := os.ReadFile(path)
		s = strings.TrimSpace(string(b))
		return err == nil && strings.HasSuffix(string(b), "\n")
	}, "child writes "+path)
	return s
}

func requireFree(t *testing.T, c *ticketdtest.Cluster, key string) {
	t.Helper()
	got, err := c.Lock(c.Leader(t)).GetLock(ctxT(t), &ticketv1.GetLockRequest{Key: key})
	require.NoError(t, err)
	require.False(t, got.GetHeld(), "%s is released", key)
}

// TestLockRun: the command gets the key and token in its environment, its
// exit status becomes ticketctl's, and the lock is released when it exits; a
// held key without --wait exits 2.
func TestLockRun(t *testing.T) {
	t.Parallel() // one backend, its own cluster: beside the others (see matrix)
	c := start(t, backends()[0])
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env")
	cmd, _, stderr := ctlCmd(t, c, "lock", "run", "run/a", "--ttl", "2s", "--",
		"sh", "-c", `echo "$TICKETD_KEY $TICKETD_FENCING_TOKEN" > `+envFile+`; exit 7`)
	require.Equal(t, 7, exitCode(t, cmd), "stderr: %s", stderr)
	fields := strings.Fields(waitFile(t, envFile))
	require.Len(t, fields, 2)
	assert.Equal(t, "run/a", fields[0])
	tok, err := strconv.ParseUint(fields[1], 10, 64)
	require.NoError(t, err)
	assert.NotZero(t, tok)
	requireFree(t, c, "run/a")

	cmd, _, stderr = ctlCmd(t, c, "lock", "run", "run/a", "--", "true")
	require.Equal(t, 0, exitCode(t, cmd), "stderr: %s", stderr)
	requireFree(t, c, "run/a")

	_, err = c.Lock(c.Leader(t)).Acquire(ctxT(t), &ticketv1.AcquireRequest{Key: "run/held", LeaseMs: 60_000, Owner: "x"})
	require.NoError(t, err)
	cmd, _, _ = ctlCmd(t, c, "lock", "run", "run/held", "--", "true")
	assert.Equal(t, 2, exitCode(t, cmd), "a held key without --wait exits 2")
}

// TestLockRunForwardsSignals: SIGTERM to ticketctl reaches the command;
// ticketctl releases the lock and exits 143 (128+SIGTERM), saying it was
// stopped, whatever status the command chose.
func TestLockRunForwardsSignals(t *testing.T) {
	t.Parallel() // one backend, its own cluster: beside the others (see matrix)
	c := start(t, backends()[0])
	ready := filepath.Join(t.TempDir(), "ready")
	cmd, _, stderr := ctlCmd(t, c, "lock", "run", "run/sig", "--",
		"sh", "-c", `trap 'exit 42' TERM; echo ok > `+ready+`; while :; do sleep 0.05; done`)
	require.NoError(t, cmd.Start())
	waitFile(t, ready)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stderr: %s", stderr)
	assert.Equal(t, 143, ee.ExitCode())
	assert.Contains(t, stderr.String(), "stopped by SIGTERM")
	requireFree(t, c, "run/sig")
}

// TestLockRunKillsOnLeaseLoss: the lock is taken away while the command
// runs (an operator releases it with the command's token; the renewal then
// fails): the command, which ignores SIGTERM, is killed after --kill-timeout
// and ticketctl exits 5 saying the lease was lost.
func TestLockRunKillsOnLeaseLoss(t *testing.T) {
	t.Parallel() // one backend, its own cluster: beside the others (see matrix)
	c := start(t, backends()[0])
	tokFile := filepath.Join(t.TempDir(), "token")
	cmd, _, stderr := ctlCmd(t, c, "lock", "run", "run/lost", "--ttl", "600ms", "--kill-timeout", "300ms", "--",
		"sh", "-c", `echo "$TICKETD_FENCING_TOKEN" > `+tokFile+`; trap '' TERM; exec sleep 60`)
	require.NoError(t, cmd.Start())
	tok, err := strconv.ParseUint(waitFile(t, tokFile), 10, 64)
	require.NoError(t, err)
	_, err = c.Lock(c.Leader(t)).Release(ctxT(t), &ticketv1.ReleaseRequest{Key: "run/lost", Token: tok})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(safety):
		t.Fatal("ticketctl did not end after the lease was lost")
	}
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 5, ee.ExitCode(), "stderr: %s", stderr)
	assert.Contains(t, stderr.String(), "lease lost")
	assert.Contains(t, stderr.String(), "SIGKILL", "the command ignored SIGTERM and was killed")
}

// TestLockAcquireHold: --hold prints the token first, keeps the lock, and
// releases it on Ctrl-C (SIGINT), exiting 0.
func TestLockAcquireHold(t *testing.T) {
	t.Parallel() // one backend, its own cluster: beside the others (see matrix)
	c := start(t, backends()[0])
	cmd, _, stderr := ctlCmd(t, c, "-o", "json", "lock", "acquire", "hold/a", "--ttl", "1s", "--hold")
	cmd.Stdout = nil
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "stderr: %s", stderr)
	var g struct {
		Token uint64 `json:"token,string"` // the API's JSON: 64-bit integers are strings
	}
	require.NoError(t, json.Unmarshal([]byte(line), &g), line)
	time.Sleep(1500 * time.Millisecond) // longer than the TTL: renewals keep it
	got, err := c.Lock(c.Leader(t)).GetLock(ctxT(t), &ticketv1.GetLockRequest{Key: "hold/a"})
	require.NoError(t, err)
	require.True(t, got.GetHeld())
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, cmd.Wait(), "stderr: %s", stderr)
	requireFree(t, c, "hold/a")
	assert.NotZero(t, g.Token)
}
