package e2e_test

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// TestMakeNodeWaitsForReadyzAndStopIsQuiet runs scripts/cluster.sh (make
// run) and its restart (make node N=n2). A restart returns only once the
// node answers /readyz 200; with n1 and n3 hung (SIGSTOP) there is no
// quorum, so the restarted n2 never becomes ready: the restart fails within
// READY_TIMEOUT, naming /readyz's answer and showing the end of n2's log.
// Then n1 is killed with kill -9 (the README's failover) while n3 stays
// hung, and the script is stopped: it SIGKILLs n3 once STOP_TIMEOUT has
// passed since its SIGTERM, every node ends, and bash prints no job line
// ("Killed") for either node.
func TestMakeNodeWaitsForReadyzAndStopIsQuiet(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	root := repoRoot(t)
	ticketd, err := buildTicketd()
	require.NoError(t, err)
	ctl := ticketctlBin(t)
	data := filepath.Join(t.TempDir(), "data")
	api, peer, metrics := ticketdtest.FreeAddrs(t, 3), ticketdtest.FreeAddrs(t, 3), ticketdtest.FreeAddrs(t, 3)
	env := clusterScriptEnv(data, ticketd, ctl, api, peer, metrics, "STOP_TIMEOUT=5")
	script := filepath.Join(root, "scripts", "cluster.sh")

	cmd, out, done := startClusterScript(t, root, data, env)
	var started []int
	t.Cleanup(func() {
		for _, p := range started {
			_ = syscall.Kill(p, syscall.SIGKILL) // a node the script left behind (stopped ones too)
		}
	})
	started = nodePids(t, data)

	restart := func(extra ...string) (string, error) {
		c := exec.Command("bash", script, "restart", "n2")
		c.Env = append(slices.Clone(env), extra...)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		b, err := c.CombinedOutput()
		started = append(started, nodePids(t, data)[1])
		return string(b), err
	}

	// A restart with the other two up: the node is ready when it returns.
	b, err := restart()
	require.NoError(t, err, "restart n2: %s", b)
	resp, err := http.Get("http://" + api[1] + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "n2's /readyz once the restart returned (%s)", b)

	// No quorum: n2 comes back but cannot become ready.
	pids := nodePids(t, data)
	require.NoError(t, syscall.Kill(pids[0], syscall.SIGSTOP))
	require.NoError(t, syscall.Kill(pids[2], syscall.SIGSTOP))
	b, err = restart("READY_TIMEOUT=3")
	require.Error(t, err, "restart of a node that cannot become ready: %s", b)
	assert.Contains(t, b, "n2 (pid ")
	assert.Contains(t, b, "not ready after 3s")
	assert.Contains(t, b, "/readyz answers 503 not ready")
	assert.Contains(t, b, "ticketd serving", "the end of n2's log")
	assert.NotContains(t, b, "restarted n2")

	// kill -9 of n1 (a child of the script), reported by the supervisor.
	require.NoError(t, syscall.Kill(pids[0], syscall.SIGKILL))
	exited := "node n1 (pid " + strconv.Itoa(pids[0]) + ") exited"
	require.Eventually(t, func() bool { return strings.Contains(out.String(), exited) }, 30*time.Second, 100*time.Millisecond,
		"the supervisor reports n1's exit:\n%s", out)

	// Stop: n3 is hung and gets SIGKILL after STOP_TIMEOUT.
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatalf("cluster.sh did not stop with n3 hung:\n%s", out)
	}
	s := out.String()
	assert.Contains(t, s, "n3 (pid "+strconv.Itoa(pids[2])+") did not stop within 5s of SIGTERM: stopped with SIGKILL")
	assert.NotContains(t, s, "Killed", "bash's job line for a node killed by a signal")
	assert.NotContains(t, s, "Terminated", "bash's job line for a node killed by a signal")
	for _, p := range nodePids(t, data) {
		assert.Eventually(t, func() bool { return !alive(p) }, 30*time.Second, 100*time.Millisecond,
			"node pid %d still runs after the script stopped", p)
	}
}
