package peer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Sentinel errors of package peer.
var (
	// ErrNoSource: the bench/etcdpeer sources were not found.
	ErrNoSource = errors.New("peer: etcdpeer sources not found")
	// ErrBuild: `go build` of bench/etcdpeer failed (the error carries its output).
	ErrBuild = errors.New("peer: build failed")
	// ErrRun: the peer process failed or printed no valid Output.
	ErrRun = errors.New("peer: run failed")
)

// BuildConfig says where the peer's sources are and where to put the binary.
type BuildConfig struct {
	// SourceDir is the bench/etcdpeer directory; empty means the one next to
	// this package's source (found through the compiled-in file path) or,
	// failing that, bench/etcdpeer or etcdpeer under the working directory or
	// one of its parents.
	SourceDir string
	// CacheDir holds built binaries; empty means <user cache dir>/ticketbench.
	CacheDir string
	// Log, if set, receives the go command's output while building.
	Log io.Writer
}

// Build returns the path of an etcdpeer binary built from the current sources,
// building it with `GOWORK=off go build` only when no binary for the same
// sources and Go version is cached. The first build downloads etcd's modules
// through the module proxy and takes a minute or two on two cores. Errors:
// ErrNoSource, ErrBuild, file-system errors, ctx.Err().
func Build(ctx context.Context, cfg BuildConfig) (string, error) {
	src, err := sourceDir(cfg.SourceDir)
	if err != nil {
		return "", err
	}
	cache := cfg.CacheDir
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cache = filepath.Join(base, "ticketbench")
	}
	key, err := sourceHash(src)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cache, "etcdpeer-"+key)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("peer: cache dir: %w", err)
	}
	tmp := bin + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if cfg.Log != nil {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, cfg.Log), io.MultiWriter(&out, cfg.Log)
	}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("%w: GOWORK=off go build in %s: %v\n%s", ErrBuild, src, err, out.String())
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("peer: %w", err)
	}
	return bin, nil
}

// sourceDir finds bench/etcdpeer.
func sourceDir(dir string) (string, error) {
	var candidates []string
	if dir != "" {
		candidates = []string{dir}
	} else {
		if _, file, _, ok := runtime.Caller(0); ok {
			candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "etcdpeer"))
		}
		if wd, err := os.Getwd(); err == nil {
			for d := wd; ; d = filepath.Dir(d) {
				candidates = append(candidates, filepath.Join(d, "bench", "etcdpeer"), filepath.Join(d, "etcdpeer"))
				if filepath.Dir(d) == d {
					break
				}
			}
		}
	}
	for _, c := range candidates {
		if fi, err := os.Stat(filepath.Join(c, "go.mod")); err == nil && fi.Mode().IsRegular() {
			return filepath.Abs(c)
		}
	}
	return "", fmt.Errorf("%w (looked in %s)", ErrNoSource, strings.Join(candidates, ", "))
}

// sourceHash hashes everything the peer binary is built from that can change
// in this repository: its own go.mod, go.sum and Go files, the Go files of the
// bench packages it imports (cputime, handoff, latency, load, loadproc,
// loopback, peer, report), and the Go version.
func sourceHash(src string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version(), goVersion())
	dirs := []string{src}
	for _, pkg := range []string{"cputime", "handoff", "latency", "load", "loadproc", "loopback", "peer", "report"} {
		dirs = append(dirs, filepath.Join(src, "..", pkg))
	}
	for i, d := range dirs {
		entries, err := os.ReadDir(d)
		if i > 0 && errors.Is(err, os.ErrNotExist) {
			continue // a package the sources at hand do not have
		}
		if err != nil {
			return "", fmt.Errorf("peer: hash sources: %w", err)
		}
		var names []string
		for _, e := range entries {
			n := e.Name()
			if e.Type().IsRegular() && (strings.HasSuffix(n, ".go") || n == "go.mod" || n == "go.sum") {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		for _, n := range names {
			b, err := os.ReadFile(filepath.Join(d, n))
			if err != nil {
				return "", fmt.Errorf("peer: hash sources: %w", err)
			}
			fmt.Fprintf(h, "%s/%s %d\n", filepath.Base(d), n, len(b))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// goVersion is the `go` command's version, which may differ from the
// toolchain this binary was built with; "" if it cannot be run.
func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
