package procstop

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// spinnersEnv, when set to a number, makes the test binary a child that
// spins that many threads on the CPU (see spin) instead of running tests.
const spinnersEnv = "PROCSTOP_TEST_SPINNERS"

func TestMain(m *testing.M) {
	if n := os.Getenv(spinnersEnv); n != "" {
		spin(n)
	}
	os.Exit(m.Run())
}

// spin runs n goroutines, each locked to a thread of its own, that never
// stop using the CPU, with GOMAXPROCS above n (more runnable threads than a
// small machine has cores: the thread the kernel picks for a SIGSTOP waits
// for a CPU while the others run). It prints "ready" once every one runs,
// then waits for ever: the parent kills it.
func spin(n string) {
	threads, err := strconv.Atoi(n)
	if err != nil || threads < 1 {
		fmt.Fprintf(os.Stderr, "%s=%q: want a positive number\n", spinnersEnv, n)
		os.Exit(2)
	}
	runtime.GOMAXPROCS(threads + 2)
	var running sync.WaitGroup
	for range threads {
		running.Add(1)
		go func() {
			runtime.LockOSThread()
			running.Done()
			for x := 0; ; x++ {
				sink.Store(int64(x))
			}
		}()
	}
	running.Wait()
	fmt.Println("ready")
	select {}
}

// sink keeps the spinners' loops from being optimised away.
var sink atomic.Int64

// spinners is how many threads the child spins: more than the 2 cores the
// suite runs on, so that some of them are always waiting for a CPU.
const spinners = 8

// startSpinner starts the test binary as a spinning child (spin) and
// returns once its spinners run; the child is killed when the test ends.
func startSpinner(t *testing.T) *os.Process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), spinnersEnv+"="+strconv.Itoa(spinners))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // SIGKILL ends a stopped process too
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("spinning child: %q, %v", line, err)
	}
	return cmd.Process
}

// awaitRunning waits until at least n threads of pid run again (after
// SIGCONT), failing the test after Within.
func awaitRunning(t *testing.T, pid, n int) {
	t.Helper()
	deadline := time.Now().Add(Within)
	for {
		running, err := runningThreads(pid)
		if err != nil {
			t.Fatal(err)
		}
		if len(running) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d: %d thread(s) running %v after SIGCONT, want at least %d: %v", pid, len(running), Within, n, running)
		}
		time.Sleep(pollEvery)
	}
}

// TestStopReturnsOnceEveryThreadStopped: right after Stop returns, no
// thread of a process whose threads all compete for the CPU is running;
// SIGCONT runs them again. Round after round: the window it closes (the
// kernel's group stop reaching every thread) is short.
func TestStopReturnsOnceEveryThreadStopped(t *testing.T) {
	p := startSpinner(t)
	for round := range 30 {
		// Every round starts with the spinners running, which also shows
		// that runningThreads sees running threads.
		awaitRunning(t, p.Pid, spinners)
		if err := Stop(p); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		running, err := runningThreads(p.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if len(running) > 0 {
			t.Fatalf("round %d: Stop returned while pid %d had %d thread(s) running: %s",
				round, p.Pid, len(running), strings.Join(running, ", "))
		}
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWaitStoppedNamesRunningThreads: a process that was never stopped
// fails the wait, and the error names its pid and its running threads.
func TestWaitStoppedNamesRunningThreads(t *testing.T) {
	p := startSpinner(t)
	err := WaitStopped(p.Pid, 50*time.Millisecond)
	if err == nil {
		t.Fatal("WaitStopped returned nil for a running process")
	}
	for _, want := range []string{fmt.Sprintf("pid %d:", p.Pid), "still running", ") R"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestStopOfExitedProcess: a process that has exited (and been waited
// for) runs no thread: Stop returns nil.
func TestStopOfExitedProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if err := Stop(cmd.Process); err != nil {
		t.Fatalf("Stop of an exited process: %v", err)
	}
}

// TestParseStat: the thread's name may hold spaces and parentheses; the
// state is the letter after the last ')'; a line without one is refused.
func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		line, name string
		state      byte
	}{
		{"4507 (ticketd) S 4500 4507 1 0", "ticketd", 'S'},
		{"12 (a) b (c)) T 1 12", "a) b (c)", 'T'},
		{"13 (x) t 1", "x", 't'},
	} {
		name, state, err := parseStat([]byte(tc.line))
		if err != nil || name != tc.name || state != tc.state {
			t.Errorf("parseStat(%q) = %q %c %v, want %q %c", tc.line, name, state, err, tc.name, tc.state)
		}
	}
	for _, bad := range []string{"", "12 ticketd S", "12 (ticketd)", "12 (ticketd)S 1"} {
		if _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}
