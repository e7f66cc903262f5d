package ticketdtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// BinEnv names the environment variable holding a prebuilt ticketd binary.
const BinEnv = "TICKETD_BIN"

// Package is the import path of the ticketd command built when BinEnv is unset.
const Package = "github.com/ticketd/ticketd/server/cmd/ticketd"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// binDirPrefix names the per-process directories holding built binaries; the
// suffix is the building process's pid, so stale ones can be removed.
const binDirPrefix = "ticketdtest-bin-"

// Binary returns the path of the ticketd binary: $TICKETD_BIN when set, else
// one built once per test process into a temporary directory. It fails the
// test if the build fails.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinEnv); p != "" {
		return p
	}
	buildOnce.Do(func() { buildPath, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("ticketdtest: %v", buildErr)
	}
	return buildPath
}

func build() (string, error) {
	removeStaleBinaries()
	dir := filepath.Join(os.TempDir(), binDirPrefix+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "ticketd")
	cmd := exec.Command("go", "build", "-o", out, Package)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s (run inside the ticketd workspace, or set %s): %v\n%s", Package, BinEnv, err, b)
	}
	return out, nil
}

// removeStaleBinaries deletes binary directories of test processes that have exited.
func removeStaleBinaries() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), binDirPrefix))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(d)
		}
	}
}
