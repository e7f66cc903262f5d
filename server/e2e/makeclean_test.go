package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// TestMakeCleanRefusesLiveNodes runs scripts/clean.sh (make clean) on the
// data root of a real running node laid out as make run lays it out
// ($DATA/n1 with its pid in $DATA/n1.pid): it refuses, naming the node, and
// removes nothing; once the node has stopped it removes the data root and
// the build dir. A pid file whose process is not that node does not count.
func TestMakeCleanRefusesLiveNodes(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c := ticketdtest.Start(t, ticketdtest.Options{Nodes: 1})
	data := filepath.Dir(c.Node(0).DataDir)
	pidFile := filepath.Join(data, "n1.pid")
	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(c.Node(0).PID())+"\n"), 0o600))
	bin := filepath.Join(t.TempDir(), "bin")
	require.NoError(t, os.Mkdir(bin, 0o700))
	clean := func() (int, string) {
		cmd := exec.Command("../../scripts/clean.sh")
		cmd.Env = append(os.Environ(), "DATA="+data, "BIN="+bin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", out)
			return ee.ExitCode(), string(out)
		}
		return 0, string(out)
	}

	code, out := clean()
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "n1 (pid "+strconv.Itoa(c.Node(0).PID())+")")
	assert.DirExists(t, c.Node(0).DataDir, "nothing removed")
	assert.DirExists(t, bin)

	c.Terminate(0)
	code, out = clean()
	assert.Equal(t, 0, code, out)
	assert.NoDirExists(t, data)
	assert.NoDirExists(t, bin)

	// A stale pid file naming some other live process (this test) does not
	// block a clean.
	require.NoError(t, os.MkdirAll(data, 0o700))
	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600))
	code, out = clean()
	assert.Equal(t, 0, code, out)
	assert.NoDirExists(t, data)
}
