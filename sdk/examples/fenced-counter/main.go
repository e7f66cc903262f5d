package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(workerMain(ctx, os.Args[2:], os.Stderr))
	}
	var (
		cfg config
		eps string
	)
	flag.StringVar(&eps, "endpoints", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003", "ticketd API endpoints, comma-separated")
	flag.StringVar(&cfg.key, "key", "examples/fenced-counter", "lock key")
	flag.IntVar(&cfg.workers, "workers", 3, "worker processes")
	flag.IntVar(&cfg.rounds, "rounds", 5, "increments per worker")
	flag.DurationVar(&cfg.ttl, "ttl", 2*time.Second, "lease TTL")
	flag.BoolVar(&cfg.stall, "stall", true, "stop worker 0 with SIGSTOP between its read and its write, until its lease has passed on")
	flag.Parse()
	cfg.endpoints = strings.Split(eps, ",")
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fenced-counter:", err)
		os.Exit(1)
	}
	cfg.self = self
	sum, err := run(ctx, cfg, os.Stderr)
	fmt.Printf("counter = %d, accepted writes = %d, refused writes = %d\n", sum.final, len(sum.accepted), len(sum.rejected))
	for _, w := range sum.rejected {
		fmt.Printf("  refused: worker %d token %d value %d (store had seen token %d)\n", w.Worker, w.Token, w.Value, w.Highest)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fenced-counter:", err)
		os.Exit(1)
	}
	fmt.Println("no increment lost, no stale write accepted")
}

// config is one run of the example.
type config struct {
	endpoints []string
	key       string
	workers   int
	rounds    int
	ttl       time.Duration
	stall     bool
	self      string // executable started as "self worker ..." for each worker
}

// summary is what the store saw.
type summary struct {
	final    int64
	accepted []write
	rejected []write
}

// run starts the store and the worker processes, waits for them, and checks
// the store's history: every accepted write is the previous value plus one
// with a higher token (no increment lost), and the only refused write is the
// stalled worker's (no stale write accepted).
func run(ctx context.Context, cfg config, logw io.Writer) (summary, error) {
	logw = &lockedWriter{w: logw}
	st := &store{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return summary{}, err
	}
	var (
		mu    sync.Mutex
		procs = map[int]*os.Process{}
	)
	const stalled = 0
	st.onStall = func(worker int, token uint64) {
		mu.Lock()
		p := procs[worker]
		mu.Unlock()
		if p == nil || pause(p) != nil {
			return
		}
		fmt.Fprintf(logw, "store: worker %d stopped (SIGSTOP) while holding token %d\n", worker, token)
		// Keep it stopped until another worker holds the lock and has used
		// it: the stalled lease has then certainly passed on.
		limit := time.Now().Add(20 * cfg.ttl)
		for st.highestToken() <= token && time.Now().Before(limit) && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Fprintf(logw, "store: highest token seen is %d; resuming worker %d (SIGCONT)\n", st.highestToken(), worker)
		_ = resume(p)
	}
	srv := &http.Server{Handler: st.handler()}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	var cmds []*exec.Cmd
	for i := range cfg.workers {
		stallRound := -1
		if cfg.stall && i == stalled {
			stallRound = min(1, cfg.rounds-1)
		}
		cmd := exec.CommandContext(ctx, cfg.self, "worker",
			"-endpoints", strings.Join(cfg.endpoints, ","), "-store", "http://"+ln.Addr().String(),
			"-key", cfg.key, "-id", strconv.Itoa(i), "-rounds", strconv.Itoa(cfg.rounds),
			"-ttl", cfg.ttl.String(), "-stall-round", strconv.Itoa(stallRound))
		cmd.Stdout, cmd.Stderr = logw, logw
		mu.Lock()
		if err := cmd.Start(); err != nil {
			mu.Unlock()
			break
		}
		procs[i] = cmd.Process
		mu.Unlock()
		cmds = append(cmds, cmd)
	}
	var errs []error
	if len(cmds) < cfg.workers {
		errs = append(errs, fmt.Errorf("started %d of %d workers", len(cmds), cfg.workers))
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("worker %d: %w", i, err))
		}
	}

	st.mu.Lock()
	sum := summary{final: st.value, accepted: append([]write(nil), st.accepted...), rejected: append([]write(nil), st.rejected...)}
	st.mu.Unlock()
	errs = append(errs, sum.check(cfg.stall, stalled))
	return sum, errors.Join(errs...)
}

// check verifies the store's history.
func (s summary) check(stall bool, stalled int) error {
	var errs []error
	var prev write
	for i, w := range s.accepted {
		if w.Value != int64(i+1) {
			errs = append(errs, fmt.Errorf("lost increment: accepted write %d set %d, want %d", i, w.Value, i+1))
		}
		if i > 0 && w.Token <= prev.Token {
			errs = append(errs, fmt.Errorf("stale write accepted: token %d after token %d", w.Token, prev.Token))
		}
		prev = w
	}
	if s.final != int64(len(s.accepted)) {
		errs = append(errs, fmt.Errorf("counter is %d after %d accepted increments", s.final, len(s.accepted)))
	}
	for _, w := range s.rejected {
		if !stall || w.Worker != stalled {
			errs = append(errs, fmt.Errorf("write of worker %d token %d refused, only the stalled worker's should be", w.Worker, w.Token))
		}
	}
	if stall && len(s.rejected) != 1 {
		errs = append(errs, fmt.Errorf("%d writes refused, want exactly the stalled one", len(s.rejected)))
	}
	return errors.Join(errs...)
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
