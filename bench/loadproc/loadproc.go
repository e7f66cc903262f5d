package loadproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ticketd/ticketd/bench/cputime"
	"github.com/ticketd/ticketd/bench/load"
)

// Sentinel errors of package loadproc.
var (
	// ErrRun: the client process could not be started, failed, or printed
	// no valid Result (the error carries the tail of its stderr).
	ErrRun = errors.New("loadproc: client process failed")
)

// Env is the environment variable that makes a program a client process:
// set (to "1") by Run in the child's environment, read by Serve.
const Env = "TICKETBENCH_LOADPROC"

// Spec is one measurement for a client process.
type Spec struct {
	// Workload names what to run; the program's Measure interprets it
	// (ticketbench: report.Workload…, etcdpeer: its -workload names).
	Workload string `json:"workload"`
	// Target is where the clients connect (a base URL, an endpoint).
	Target string `json:"target"`
	// Prefix makes the keys of this measurement unique on the cluster.
	Prefix string `json:"prefix"`
	// Keys is how many locks (keys) each session (lease) holds, for the
	// workloads that hold several under one keep-alive; 0 elsewhere.
	Keys int `json:"keys,omitempty"`
	// Load drives the workload. Run sets Load.CPU when it is nil: the
	// server processes Servers (default: the parent) and the client
	// process itself.
	Load load.Config `json:"load"`
	// Servers are the pids of the server processes; empty means the
	// process that calls Run.
	Servers []int `json:"servers,omitempty"`
}

// Measure runs spec in the client process and returns its figures.
// spec.Load.CPU is set. ctx ends when the parent interrupts the child.
type Measure func(ctx context.Context, spec Spec) (load.Result, error)

// Config says how Run starts the client process.
type Config struct {
	// Exe is the program to start; empty means this process's executable
	// (os.Executable), whose main must call Serve first.
	Exe string
	// Args are passed to Exe (e.g. "-test.run=^$" for a test binary).
	Args []string
	// Stderr, if set, receives the child's stderr as well.
	Stderr io.Writer
}

// Run starts a client process for spec, waits for it and returns its
// Result. On ctx's end the child is interrupted (it stops its workers and
// exits), then killed 10 s later if still running; a child never outlives
// its parent (Pdeathsig). Errors: ErrRun with the child's stderr tail, or
// ctx.Err().
func Run(ctx context.Context, cfg Config, spec Spec) (load.Result, error) {
	exe := cfg.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return load.Result{}, fmt.Errorf("%w: %v", ErrRun, err)
		}
	}
	if len(spec.Servers) == 0 {
		spec.Servers = []int{os.Getpid()}
	}
	if spec.Load.CPU == nil {
		spec.Load.CPU = &cputime.Meter{Servers: spec.Servers, Clients: []int{0}}
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return load.Result{}, fmt.Errorf("%w: encode spec: %v", ErrRun, err)
	}
	cmd := exec.CommandContext(ctx, exe, cfg.Args...)
	cmd.Env = append(os.Environ(), Env+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var stdout bytes.Buffer
	tail := &tailWriter{}
	cmd.Stdout = &stdout
	cmd.Stderr = tail
	if cfg.Stderr != nil {
		cmd.Stderr = io.MultiWriter(tail, cfg.Stderr)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		return load.Result{}, ctx.Err()
	}
	if err != nil {
		return load.Result{}, fmt.Errorf("%w: %s: %v: %s", ErrRun, spec.Workload, err, tail.String())
	}
	var res load.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return load.Result{}, fmt.Errorf("%w: %s: decode result: %v: %s", ErrRun, spec.Workload, err, tail.String())
	}
	return res, nil
}

// Serve, in a process Run started (Env set), reads the Spec from stdin, runs
// it with measure until done or interrupted, writes the Result as JSON on
// stdout and exits: 0 on success, 1 after writing the error on stderr. In
// any other process it returns false at once.
func Serve(measure Measure) bool {
	if os.Getenv(Env) == "" {
		return false
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := serve(ctx, measure, os.Stdin, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadproc:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// serve is Serve's work on explicit streams.
func serve(ctx context.Context, measure Measure, in io.Reader, out io.Writer) error {
	var spec Spec
	if err := json.NewDecoder(in).Decode(&spec); err != nil {
		return fmt.Errorf("decode spec: %w", err)
	}
	if spec.Load.CPU == nil {
		return errors.New("spec without a CPU meter")
	}
	res, err := measure(ctx, spec)
	if err != nil {
		return fmt.Errorf("%s: %w", spec.Workload, err)
	}
	return json.NewEncoder(out).Encode(res)
}

// tailWriter keeps the last lines written to it, for error messages.
type tailWriter struct {
	buf bytes.Buffer
}

// tailBytes is how much of the child's stderr an error carries.
const tailBytes = 2048

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if t.buf.Len() > 4*tailBytes {
		b := t.buf.Bytes()
		t.buf = *bytes.NewBuffer(append([]byte(nil), b[len(b)-tailBytes:]...))
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	s := t.buf.String()
	if len(s) > tailBytes {
		s = s[len(s)-tailBytes:]
	}
	return strings.TrimSpace(s)
}
