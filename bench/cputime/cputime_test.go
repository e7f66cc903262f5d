package cputime_test

import (
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/cputime"
)

func TestSelfGrowsWithWork(t *testing.T) {
	before := cputime.Self()
	require.Positive(t, before, "a running test has used some CPU")
	burn(50 * time.Millisecond)
	require.Greater(t, cputime.Self(), before)
}

func TestOf(t *testing.T) {
	require.Zero(t, cputime.Of(nil))
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
	require.NoError(t, cmd.Run())
	require.Positive(t, cputime.Of(cmd.ProcessState))
}

func TestChildrenCountsExitedChildren(t *testing.T) {
	before := cputime.Children()
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
	require.NoError(t, cmd.Run())
	require.Greater(t, cputime.Children(), before, "the waited-for child's CPU is counted")
}

func TestShare(t *testing.T) {
	n := float64(runtime.NumCPU())
	require.InDelta(t, 1/n, cputime.Share(time.Second, time.Second), 1e-9)
	require.InDelta(t, 0.5/n, cputime.Share(time.Second, 2*time.Second), 1e-9)
	require.Zero(t, cputime.Share(time.Second, 0))
}

func TestMachineCountsThisProcess(t *testing.T) {
	before := cputime.Machine()
	require.Positive(t, before)
	burn(50 * time.Millisecond)
	// /proc/stat counts in 10 ms ticks; the spin got at least some CPU.
	require.Greater(t, cputime.Machine(), before)
}

// burn spins for about d of wall time (bounded, so a broken clock cannot
// hang the test), which on an idle or busy machine uses some CPU.
func burn(d time.Duration) {
	x := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := range 100_000 {
			x += i
		}
	}
	_ = x
}
