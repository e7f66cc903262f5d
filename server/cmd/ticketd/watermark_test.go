package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// runServe runs `ticketd serve args...` until ready reports true (then it
// stops it, as SIGTERM would) or the command returns; it returns the
// command's error.
func runServe(t *testing.T, args []string, ready func() bool) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := rootCmd()
	cmd.SetArgs(append([]string{"serve"}, args...))
	cmd.SetOut(os.Stderr)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(runCtx) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if ready() {
				stop()
				return <-done
			}
		case <-ctx.Done():
			t.Fatal("ticketd serve neither became ready nor returned in 60 s")
		}
	}
}

// TestAcceptMissingWatermarkFlag: a real node (hashicorp backend, the
// default log store on disk) whose watermark file was deleted after a run refuses to start,
// saying what is missing and naming the flag; started with
// --accept-missing-watermark it starts and writes a fresh watermark, so
// the flag reaches the backend through the configuration.
func TestAcceptMissingWatermarkFlag(t *testing.T) {
	dir := t.TempDir()
	api, raftAddr := ticketdtest.FreeAddr(t), ticketdtest.FreeAddr(t)
	args := []string{"--id", "n1", "--api-addr", api, "--raft-addr", raftAddr,
		"--data-dir", dir, "--log-level", "error"}
	readyz := func() bool {
		res, err := http.Get("http://" + api + "/readyz")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	}
	require.NoError(t, runServe(t, args, readyz), "first start on an empty data dir")
	mark := filepath.Join(dir, "watermark")
	require.FileExists(t, mark)

	require.NoError(t, os.Remove(mark))
	err := runServe(t, args, readyz)
	require.Error(t, err, "started with its watermark deleted")
	for _, want := range []string{"watermark file is missing", "RemoveMember", "--accept-missing-watermark"} {
		require.True(t, strings.Contains(err.Error(), want), "refusal %q does not say %q", err, want)
	}
	require.NoFileExists(t, mark, "a refused start wrote a watermark")

	require.NoError(t, runServe(t, append(args, "--accept-missing-watermark"), readyz))
	fi, err := os.Stat(mark)
	require.NoError(t, err, "no fresh watermark after --accept-missing-watermark")
	require.EqualValues(t, 20, fi.Size())

	require.NoError(t, runServe(t, args, readyz), "start without the flag after the fresh watermark")
}
