package peer_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/latency"
	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/peer"
)

// fakePeerEnv makes this test binary act as the peer program (the os/exec
// tests' pattern): it parses the peer's flags and prints an Output.
const fakePeerEnv = "TICKETBENCH_FAKE_PEER"

func TestMain(m *testing.M) {
	switch os.Getenv(fakePeerEnv) {
	case "":
		os.Exit(m.Run())
	case "fail":
		fmt.Fprintln(os.Stderr, "etcdpeer: member 0 did not start")
		os.Exit(1)
	default:
		fakePeer()
		os.Exit(0)
	}
}

func fakePeer() {
	fs := flag.NewFlagSet("etcdpeer", flag.ExitOnError)
	levels := fs.String("concurrency", "", "")
	duration := fs.Duration("duration", 0, "")
	fs.Duration("warmup", 0, "")
	fs.String("mode", "", "")
	fs.Float64("rate", 0, "")
	fs.String("dir", "", "")
	_ = fs.Parse(os.Args[1:])
	out := peer.Output{System: "etcd-mutex", EtcdVersion: "test"}
	for _, s := range strings.Split(*levels, ",") {
		n, _ := strconv.Atoi(s)
		fmt.Fprintf(os.Stderr, "%s%d\n", peer.ProgressPrefix, n)
		fmt.Fprintln(os.Stderr, "some log line")
		out.Results = append(out.Results, load.Result{Mode: load.ModeClosed, Concurrency: n, Ops: int64(10 * n),
			WindowSec: duration.Seconds(), PerSec: float64(10*n) / duration.Seconds(),
			Latency: latency.Summary{Count: int64(10 * n), P50US: 100, P90US: 200, P99US: 300, P999US: 400, MaxUS: 500}})
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}

func TestRun(t *testing.T) {
	t.Setenv(fakePeerEnv, "ok")
	var mu sync.Mutex
	var seen []int
	var stderr strings.Builder
	out, err := peer.Run(context.Background(), os.Args[0], peer.Config{
		Concurrency: []int{1, 4}, Duration: time.Second, Warmup: 100 * time.Millisecond,
		OnLevel: func(n int) { mu.Lock(); seen = append(seen, n); mu.Unlock() },
		Stderr:  &stderr,
	})
	require.NoError(t, err)
	require.Equal(t, "etcd-mutex", out.System)
	require.Len(t, out.Results, 2)
	require.Equal(t, 4, out.Results[1].Concurrency)
	require.EqualValues(t, 40, out.Results[1].Ops)
	require.Equal(t, []int{1, 4}, seen)
	require.Equal(t, "some log line\nsome log line\n", stderr.String())
}

func TestRunFailure(t *testing.T) {
	t.Setenv(fakePeerEnv, "fail")
	_, err := peer.Run(context.Background(), os.Args[0], peer.Config{Concurrency: []int{1}, Duration: time.Second})
	require.ErrorIs(t, err, peer.ErrRun)
	require.Contains(t, err.Error(), "member 0 did not start")
}

func TestConfigArgs(t *testing.T) {
	c := peer.Config{Concurrency: []int{1, 16}, Duration: 2 * time.Second, Warmup: 500 * time.Millisecond,
		Mode: load.ModeOpen, Rate: 1500, DataDir: "/d"}
	require.Equal(t, []string{"-concurrency", "1,16", "-duration", "2s", "-warmup", "500ms",
		"-mode", "open", "-rate", "1500", "-dir", "/d"}, c.Args())
}

// TestBuild builds a tiny stand-in module the way the real peer is built
// (GOWORK=off go build), then checks the cache: same sources → same binary,
// no rebuild; changed sources → a new binary.
func TestBuild(t *testing.T) {
	src := filepath.Join(t.TempDir(), "etcdpeer")
	require.NoError(t, os.MkdirAll(src, 0o755))
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(src, name), []byte(body), 0o644))
	}
	write("go.mod", "module example.com/fakepeer\n\ngo 1.26\n")
	write("main.go", "package main\n\nfunc main() { println(\"v1\") }\n")
	cache := t.TempDir()

	bin, err := peer.Build(context.Background(), peer.BuildConfig{SourceDir: src, CacheDir: cache})
	require.NoError(t, err)
	fi, err := os.Stat(bin)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&0o111, "executable")

	again, err := peer.Build(context.Background(), peer.BuildConfig{SourceDir: src, CacheDir: cache})
	require.NoError(t, err)
	require.Equal(t, bin, again)
	fi2, err := os.Stat(again)
	require.NoError(t, err)
	require.Equal(t, fi.ModTime(), fi2.ModTime(), "a cached binary is not rebuilt")

	write("main.go", "package main\n\nfunc main() { println(\"v2\") }\n")
	changed, err := peer.Build(context.Background(), peer.BuildConfig{SourceDir: src, CacheDir: cache})
	require.NoError(t, err)
	require.NotEqual(t, bin, changed)
}

func TestBuildErrors(t *testing.T) {
	_, err := peer.Build(context.Background(), peer.BuildConfig{SourceDir: t.TempDir(), CacheDir: t.TempDir()})
	require.ErrorIs(t, err, peer.ErrNoSource)

	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/broken\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() { undefined() }\n"), 0o644))
	_, err = peer.Build(context.Background(), peer.BuildConfig{SourceDir: src, CacheDir: t.TempDir()})
	require.ErrorIs(t, err, peer.ErrBuild)
	require.Contains(t, err.Error(), "undefined")
}

// TestEtcdPeerModuleResolves lists the real peer's packages the way Build
// compiles them (bench/etcdpeer on its own, GOWORK=off) with go.mod read-only:
// a go.mod left untidy by a change in a sibling module fails here, instead of
// making ticketbench skip every etcd row ("updates to go.mod needed").
func TestEtcdPeerModuleResolves(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./...")
	cmd.Dir = filepath.Join("..", "etcdpeer")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "GOWORK=off go list in bench/etcdpeer:\n%s", out)
}
