package e2e_test

import (
	"io"
	"net/http"
	"os"
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

// clusterScriptEnv is the environment of scripts/cluster.sh on the given
// data dir and free ports.
func clusterScriptEnv(data, ticketd, ctl string, api, peer, metrics []string, extra ...string) []string {
	env := append(os.Environ(), "DATA="+data, "BACKEND=hashicorp", "TICKETD="+ticketd, "TICKETCTL="+ctl,
		"API_ADDRS="+strings.Join(api, ","), "RAFT_ADDRS="+strings.Join(peer, ","), "METRICS_ADDRS="+strings.Join(metrics, ","))
	return append(env, extra...)
}

// nodePids returns the pids recorded in data/nX.pid.
func nodePids(t *testing.T, data string) []int {
	t.Helper()
	var pids []int
	for _, id := range []string{"n1", "n2", "n3"} {
		b, err := os.ReadFile(filepath.Join(data, id+".pid"))
		require.NoError(t, err)
		p, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		pids = append(pids, p)
	}
	return pids
}

// alive reports whether process pid exists.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestMakeRunStopsEveryNodeWhenStdoutIsGone: `make run 2>&1 | tee run.log`,
// `make node N=n2` from another terminal, then Ctrl-C. The Ctrl-C ends tee
// too, so the script's stdout is a closed pipe when it stops; n2, restarted
// in another process group, gets no SIGINT of its own. The script must
// still stop every node whose pid file it knows. Here the script alone gets
// SIGINT, so every node it leaves would stay up.
func TestMakeRunStopsEveryNodeWhenStdoutIsGone(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	root := repoRoot(t)
	ticketd, err := buildTicketd()
	require.NoError(t, err)
	ctl := ticketctlBin(t)
	data := filepath.Join(t.TempDir(), "data")
	api, peer, metrics := ticketdtest.FreeAddrs(t, 3), ticketdtest.FreeAddrs(t, 3), ticketdtest.FreeAddrs(t, 3)
	env := clusterScriptEnv(data, ticketd, ctl, api, peer, metrics)
	script := filepath.Join(root, "scripts", "cluster.sh")

	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command("bash", script)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	w.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, id := range []string{"n1", "n2", "n3"} {
			if b, err := os.ReadFile(filepath.Join(data, id+".pid")); err == nil {
				if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 {
					_ = syscall.Kill(p, syscall.SIGKILL) // a node the script left behind
				}
			}
		}
	})

	// Read the script's output until it has started the cluster.
	out := &syncBuffer{}
	started := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		once := false
		for {
			n, err := r.Read(buf)
			_, _ = out.Write(buf[:n])
			if !once && strings.Contains(out.String(), "stops all three") {
				once = true
				close(started)
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-started:
	case <-done:
		t.Fatalf("cluster.sh exited at start:\n%s", out)
	case <-time.After(90 * time.Second):
		t.Fatalf("cluster.sh did not start:\n%s", out)
	}

	// make node N=n2 with a node that cannot start (a bad log level): the
	// restart reports it and fails instead of printing "restarted".
	bad := exec.Command("bash", script, "restart", "n2")
	bad.Env = append(slices.Clone(env), "TICKETD_LOG_LEVEL=bogus")
	bad.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	b, err := bad.CombinedOutput()
	require.Error(t, err, "restart of a node that cannot start: %s", b)
	require.Contains(t, string(b), "n2", "the failed restart names the node")
	require.Contains(t, string(b), "exited at start", "the failed restart says the node exited: %s", b)
	require.NotContains(t, string(b), "restarted n2")

	// make node N=n2, as from another terminal: its own process group.
	restart := exec.Command("bash", script, "restart", "n2")
	restart.Env = env
	restart.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	b, err = restart.CombinedOutput()
	require.NoError(t, err, "restart n2: %s", b)
	pids := nodePids(t, data)
	for _, p := range pids {
		require.True(t, alive(p), "node pid %d is up before the stop", p)
	}

	// tee is gone: nothing reads the script's stdout any more. Then Ctrl-C.
	require.NoError(t, r.Close())
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("cluster.sh did not exit after SIGINT")
	}
	for _, p := range pids {
		assert.Eventually(t, func() bool { return !alive(p) }, 30*time.Second, 100*time.Millisecond,
			"node pid %d still runs after the script stopped", p)
	}
}

// TestMakeRunRemembersSecure: a plain run of data first run with SECURE=1
// starts the cluster secure again (client TLS, authorization on), and says
// so; it does not fall back to a plaintext API with authorization off. Its
// banner also says that it reuses the data, where, and how to start clean,
// which the first run's does not.
func TestMakeRunRemembersSecure(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	root := repoRoot(t)
	ticketd, err := buildTicketd()
	require.NoError(t, err)
	ctl := ticketctlBin(t)
	data := filepath.Join(t.TempDir(), "data")
	api, peer, metrics := ticketdtest.FreeAddrs(t, 3), ticketdtest.FreeAddrs(t, 3), ticketdtest.FreeAddrs(t, 3)

	run := func(extra ...string) string {
		cmd, out, done := startClusterScript(t, root, data, clusterScriptEnv(data, ticketd, ctl, api, peer, metrics, extra...))
		// Plaintext on the client API: refused when secure (a TLS port
		// answers 400 or cuts the request), served otherwise.
		resp, err := http.Post("http://"+api[0]+"/ticket.v1.ClusterService/Status", "application/json", strings.NewReader("{}"))
		plaintext := err == nil && resp.StatusCode == http.StatusOK
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("cluster.sh did not stop")
		}
		s := out.String()
		assert.Equal(t, !strings.Contains(s, "Secure mode"), plaintext, "the API answers plaintext exactly when not secure:\n%s", s)
		return s
	}
	first := run("SECURE=1")
	require.Contains(t, first, "Secure mode")
	require.FileExists(t, filepath.Join(data, "SECURE"))
	assert.NotContains(t, first, "Reusing the data")
	second := run("SECURE=")
	assert.Contains(t, second, "Secure mode", "a plain run of secure data stays secure")
	assert.Contains(t, second, "later runs stay secure until 'make clean'")
	assert.Contains(t, second, "Reusing the data of an earlier run in "+data+"/ (nodes n1 n2 n3)")
	// The make commands it prints carry this run's data dir and addresses,
	// so they act on this cluster, not on the default one.
	vars := " DATA=" + data + " API_ADDRS=" + strings.Join(api, ",") + " RAFT_ADDRS=" + strings.Join(peer, ",") +
		" METRICS_ADDRS=" + strings.Join(metrics, ",")
	assert.Contains(t, second, "'make clean"+vars+"' (deletes "+data+"/ and bin/), then 'make run"+vars+"'")
	assert.Contains(t, second, "Restart one node: make node N=n3"+vars+" ")
}
