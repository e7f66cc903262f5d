package cputime_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/cputime"
)

// burnEnv makes this test binary a child that spins until its own CPU time
// (getrusage) reaches burnCPU, prints "burnt" and then blocks on stdin.
const burnEnv = "CPUTIME_TEST_BURN"

// burnCPU is how much CPU the child uses before it reports.
const burnCPU = 300 * time.Millisecond

func TestMain(m *testing.M) {
	if os.Getenv(burnEnv) == "1" {
		for cputime.Self() < burnCPU {
			burn(time.Millisecond)
		}
		fmt.Println("burnt")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startBurner starts the child and returns once it has used burnCPU; it
// stays alive (idle) until the test ends.
func startBurner(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), burnEnv+"=1")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "burnt\n", line)
	return cmd
}

// The CPU a child burnt shows under its own pid, not under the reader's.
func TestPIDReadsAnotherProcess(t *testing.T) {
	child := startBurner(t)
	got, err := cputime.PID(child.Process.Pid)
	require.NoError(t, err)
	// /proc counts whole 10 ms ticks of the same accounting getrusage reads.
	require.GreaterOrEqual(t, got, burnCPU-10*time.Millisecond)

	self, err := cputime.PID(os.Getpid())
	require.NoError(t, err)
	require.Positive(t, self)
}

// A Meter puts the child's CPU on the side it was listed on: burnt before
// the first sample, nothing between the samples (the child idles); the
// other side is this process.
func TestMeterAttributesEachSide(t *testing.T) {
	child := startBurner(t)
	m := cputime.Meter{Servers: []int{child.Process.Pid}, Clients: []int{0}}
	a, err := m.Sample()
	require.NoError(t, err)
	require.GreaterOrEqual(t, a.Server, burnCPU-10*time.Millisecond, "the child's CPU is the server side's")
	burn(50 * time.Millisecond)
	b, err := m.Sample()
	require.NoError(t, err)
	u := m.Between(a, b)
	require.Positive(t, u.WallSec)
	require.Positive(t, u.ClientSec, "this process spun between the samples")
	require.Equal(t, 1, u.ServerProcs)
	require.Equal(t, 1, u.ClientProcs)

	// Swapped: the same child now counts as a client.
	swapped := cputime.Meter{Servers: []int{0}, Clients: []int{child.Process.Pid}}
	s, err := swapped.Sample()
	require.NoError(t, err)
	require.GreaterOrEqual(t, s.Client, burnCPU-10*time.Millisecond)
}

func TestPIDOfNoProcess(t *testing.T) {
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	_, err := cputime.PID(cmd.Process.Pid) // exited and reaped
	require.ErrorIs(t, err, cputime.ErrProc)

	_, err = cputime.Meter{Servers: []int{cmd.Process.Pid}}.Sample()
	require.ErrorIs(t, err, cputime.ErrProc)
}
