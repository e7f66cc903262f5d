// Package hoptrace records when one API call passes each hop of its way —
// the client's call and its connection's writes and reads, the server's
// connection reads and writes, the handler goroutine, the worker, the
// RPC, the proposal, its apply, the way back — as wall-clock times in
// nanoseconds, so that the events of the client process and of the
// server process can be merged into one timeline (both read the same
// clock). It is a measuring aid for one client at a time
// (docs/benchmarks.md, "Where a lock cycle's time goes at one client").
//
// It records nothing unless the environment variable HOPTRACE names a
// directory when the process starts; then every Mark takes a mutex and
// the marks are appended to HOPTRACE/<pid>.txt every second, one
// "<ns> <node> <event>" line each. To take the table (one client):
//
//	go build -o /tmp/tb ./bench/cmd/ticketbench
//	HOPTRACE=/tmp/h /tmp/tb -workloads lock -backends etcd -concurrency 1 -peer=false -out /tmp/r
//	python3 scripts/hoptrace/segs.py /tmp/h     # each hop's median, p90, mean (µs)
//
// HOPTRACE_H1=1 makes ticketbench's clients speak HTTP/1.1 (2: with the
// request body written with its headers); HOPTRACE_RT=<seconds> also
// writes a runtime/trace of each process, which scripts/hoptrace/rtcount.py
// and rtsites.py count per call (goroutines woken, system calls).
package hoptrace

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	rtrace "runtime/trace"
	"sync"
	"time"
)

// Dir is where marks go; empty: off.
var Dir = os.Getenv("HOPTRACE")

// On reports whether marks are recorded.
var On = Dir != ""

type mark struct {
	t    int64
	node string
	ev   string
}

var (
	mu    sync.Mutex
	marks []mark
	once  sync.Once
)

// Mark records event ev of node (any label; "" for none) now.
func Mark(node, ev string) {
	if !On {
		return
	}
	t := time.Now().UnixNano()
	once.Do(start)
	mu.Lock()
	marks = append(marks, mark{t, node, ev})
	mu.Unlock()
}

func start() {
	go func() {
		for range time.Tick(time.Second) {
			Flush()
		}
	}()
}

// Flush appends the marks recorded so far to the file.
func Flush() {
	if !On {
		return
	}
	mu.Lock()
	ms := marks
	marks = nil
	mu.Unlock()
	if len(ms) == 0 {
		return
	}
	f, err := os.OpenFile(filepath.Join(Dir, fmt.Sprintf("%d.txt", os.Getpid())), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	w := bufio.NewWriter(f)
	for _, m := range ms {
		node := m.node
		if node == "" {
			node = "-"
		}
		fmt.Fprintf(w, "%d %s %s\n", m.t, node, m.ev)
	}
	_ = w.Flush()
	_ = f.Close()
}

// With HOPTRACE_RT set as well, the process also writes a runtime/trace
// of its whole life to HOPTRACE/<pid>.trace (flushed by Flush each second
// through a flight of its own: the trace is cut when the process exits).
func init() {
	if !On || os.Getenv("HOPTRACE_RT") == "" {
		return
	}
	f, err := os.Create(filepath.Join(Dir, fmt.Sprintf("%d.trace", os.Getpid())))
	if err != nil {
		return
	}
	if err := rtrace.Start(f); err != nil {
		return
	}
	go func() {
		time.Sleep(rtSeconds())
		rtrace.Stop()
		_ = f.Close()
	}()
}

// rtSeconds is how long the runtime trace runs (HOPTRACE_RT seconds).
func rtSeconds() time.Duration {
	var s int
	_, _ = fmt.Sscan(os.Getenv("HOPTRACE_RT"), &s)
	return time.Duration(s) * time.Second
}
