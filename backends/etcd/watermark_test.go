package etcd_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/backends/etcd"
	"github.com/ticketd/ticketd/core"
)

// killNineEnv names the data dir, Raft address and log store of the child
// process of TestKillNineNeverRefusesStart.
const killNineEnv = "TICKETD_ETCD_KILL9"

// killNineConfig is the one-member node both processes run.
func killNineConfig(dir, addr, store string) backends.Config {
	cfg := backends.DefaultConfig()
	cfg.ID, cfg.RaftAddr, cfg.DataDir, cfg.LogStore = "n1", addr, dir, store
	cfg.Bootstrap = []core.Member{{ID: "n1", RaftAddr: addr}}
	cfg.StateMachine = core.NewStateMachine()
	cfg.HeartbeatInterval = backendtest.HeartbeatInterval
	cfg.ElectionTimeout = backendtest.ElectionTimeout
	// Snapshots and compactions (and their background deletions) happen
	// during the run, so the kill lands in any of them.
	cfg.SnapshotThreshold, cfg.TrailingLogs = 150, 40
	return cfg
}

// TestKillNineNeverRefusesStart kills a node with SIGKILL while it commits
// (the watermark is written in the background, beside the
// next append, and compacted entries are deleted in the background): the
// node must start again from what the kill left, without taking its log
// for a damaged one, and with every acknowledged write applied. Three
// kills, at different moments, on one data dir, on each log store.
func TestKillNineNeverRefusesStart(t *testing.T) {
	if env := os.Getenv(killNineEnv); env != "" {
		f := strings.Split(env, ",")
		killNineChild(t, f[0], f[1], f[2])
		return
	}
	for _, store := range backends.LogStores() {
		t.Run(store, func(t *testing.T) { testKillNine(t, store) })
	}
}

func testKillNine(t *testing.T, store string) {
	dir, addr := t.TempDir(), backendtest.FreeAddr(t)
	var acked uint64
	for round, killAt := range []uint64{310, 170, 430} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillNineNeverRefusesStart$", "-test.count=1")
		cmd.Env = append(os.Environ(), killNineEnv+"="+dir+","+addr+","+store)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc, n, killed := bufio.NewScanner(out), uint64(0), false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 || f[0] != "acked" {
				continue
			}
			acked, _ = strconv.ParseUint(f[1], 10, 64)
			if n++; n == killAt && !killed {
				_ = cmd.Process.Kill() // SIGKILL: nothing is closed or flushed
				killed = true
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: child exited before it was killed (%d acknowledged)", round, n)
		}

		node, err := etcd.New(killNineConfig(dir, addr, store))
		if err != nil {
			t.Fatalf("round %d: node refused to start after kill -9: %v", round, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		for err = node.ReadIndex(ctx); errors.Is(err, core.ErrNotLeader); err = node.ReadIndex(ctx) {
			time.Sleep(10 * time.Millisecond) // electing itself
		}
		cancel()
		applied := node.Status().AppliedIndex
		if cerr := node.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("round %d: after restart: %v", round, err)
		}
		if applied < acked {
			t.Fatalf("round %d: applied %d after restart, but index %d was acknowledged", round, applied, acked)
		}
		t.Logf("round %d: killed after %d commits; restarted at applied index %d (acknowledged %d)", round, n, applied, acked)
	}
}

// killNineChild runs the node and commits grants one after another,
// printing the applied index after each, until it is killed.
func killNineChild(t *testing.T, dir, addr, store string) {
	node, err := etcd.New(killNineConfig(dir, addr, store))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(os.Stdout)
	ctx := context.Background()
	for i := 0; ; i++ {
		key := fmt.Sprintf("k%d-%d", time.Now().UnixNano(), i)
		if _, err := node.Propose(ctx, core.Grant(key, 60_000, "o")); err != nil {
			if errors.Is(err, core.ErrNotLeader) {
				time.Sleep(10 * time.Millisecond) // electing itself after the restart
				continue
			}
			t.Fatal(err)
		}
		fmt.Fprintf(w, "acked %d\n", node.Status().AppliedIndex)
		_ = w.Flush()
	}
}
