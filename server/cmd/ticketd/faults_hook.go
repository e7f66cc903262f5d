//go:build faults

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/server"
)

// This file exists only in binaries built with -tags faults (the fault
// injection suite, github.com/ticketd/ticketd/faults). It lets the suite cut
// peer links without root or network namespaces: when the environment names
// a rules file, the backend's DropMessage hook drops every Raft message
// from node FROM to node TO for each line "FROM TO" of that file, as a
// network partition would. The file is re-read whenever its modification
// time or size changes (polled every faultsPoll); a missing file means no
// rule. Lines starting with # are comments.
//
// When the environment sets faultsTrailingLogsEnv, the backend keeps that
// many entries after each compaction instead of its default (10,240), so
// that a run of a few seconds already compacts its log behind snapshots
// and a power cut finds a log that depends on them (docs/faults.md#power-loss).

// faultsRulesEnv names the environment variable holding the rules file path.
const faultsRulesEnv = "TICKETD_FAULTS_RULES"

// faultsTrailingLogsEnv names the environment variable holding
// backends.Config.TrailingLogs (entries, a positive integer).
const faultsTrailingLogsEnv = "TICKETD_FAULTS_TRAILING_LOGS"

// faultsPoll is how often the rules file is checked for changes.
const faultsPoll = 10 * time.Millisecond

func init() {
	var edits []func(*backends.Config)
	if path := os.Getenv(faultsRulesEnv); path != "" {
		r := &dropRules{path: path}
		r.reload()
		go r.watch()
		edits = append(edits, func(c *backends.Config) { c.DropMessage = r.drop })
	}
	if v := os.Getenv(faultsTrailingLogsEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			fmt.Fprintf(os.Stderr, "ticketd: %s=%q: want a positive number of entries\n", faultsTrailingLogsEnv, v)
			os.Exit(2)
		}
		edits = append(edits, func(c *backends.Config) { c.TrailingLogs = n })
	}
	if len(edits) > 0 {
		extraOptions = append(extraOptions, server.WithBackendConfig(func(c *backends.Config) {
			for _, edit := range edits {
				edit(c)
			}
		}))
	}
}

type link struct{ from, to string }

// dropRules holds the current set of cut links.
type dropRules struct {
	path  string
	links atomic.Pointer[map[link]bool]
	mod   time.Time
	size  int64
}

func (r *dropRules) drop(from, to string) bool {
	m := r.links.Load()
	return m != nil && (*m)[link{from, to}]
}

func (r *dropRules) watch() {
	for range time.Tick(faultsPoll) {
		r.reload()
	}
}

// reload re-reads the file if it changed since the last read.
func (r *dropRules) reload() {
	fi, err := os.Stat(r.path)
	if err != nil {
		if r.links.Load() != nil {
			r.links.Store(nil)
			r.mod, r.size = time.Time{}, 0
		}
		return
	}
	if fi.ModTime().Equal(r.mod) && fi.Size() == r.size && r.links.Load() != nil {
		return
	}
	data, err := os.ReadFile(r.path)
	if err != nil {
		return
	}
	m := map[link]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 2 && f[0][0] != '#' {
			m[link{string(f[0]), string(f[1])}] = true
		}
	}
	r.mod, r.size = fi.ModTime(), fi.Size()
	r.links.Store(&m)
}
