package deploy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the repository this module sits in.
const repoRoot = ".."

// platforms and binaries are what `make release` builds.
var (
	platforms = []struct{ goos, goarch string }{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "arm64"}}
	binaries  = []string{"ticketd", "ticketctl"}
)

var (
	releaseOnce sync.Once
	releaseDir  string
	releaseErr  error
)

// TestMain removes the directory the tests' `make release` wrote into.
func TestMain(m *testing.M) {
	code := m.Run()
	if releaseDir != "" {
		os.RemoveAll(releaseDir)
	}
	os.Exit(code)
}

// release runs `make release` once for all tests of the package, into a
// temporary DIST, and returns that directory.
func release(t *testing.T) string {
	t.Helper()
	releaseOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ticketd-release-")
		if err != nil {
			releaseErr = err
			return
		}
		releaseDir = dir
		cmd := exec.Command("make", "-C", repoRoot, "--no-print-directory", "release", "DIST="+dir)
		// Not a sub-make of `make test`'s: its jobserver's descriptors are
		// not passed down through go test.
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
		})
		out, err := cmd.CombinedOutput()
		if err != nil {
			releaseErr = fmt.Errorf("make release: %v\n%s", err, out)
		}
	})
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	return releaseDir
}

// TestRelease checks what `make release` leaves in its directory: each
// binary for each platform, static (CGO_ENABLED=0, no ELF interpreter or
// shared library), built with -trimpath and stamped with the VCS revision;
// SHA256SUMS in sha256sum's format listing exactly those files with their
// digests; and the linux/amd64 binaries running here.
func TestRelease(t *testing.T) {
	dist := release(t)
	rev := headRevision(t)

	var want []string
	for _, p := range platforms {
		for _, b := range binaries {
			name := fmt.Sprintf("%s-%s-%s", b, p.goos, p.goarch)
			want = append(want, name)
			t.Run(name, func(t *testing.T) { checkReleaseBinary(t, filepath.Join(dist, name), b, p.goos, p.goarch, rev) })
		}
	}
	checkSums(t, dist, want)

	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Logf("not running the linux/amd64 binaries on %s/%s", runtime.GOOS, runtime.GOARCH)
		return
	}
	out, err := exec.Command(filepath.Join(dist, "ticketd-linux-amd64"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ticketd ") {
		t.Errorf("ticketd version: %v: %q", err, out)
	}
	if rev != "" && !strings.Contains(string(out), rev) {
		t.Errorf("ticketd version %q does not name the revision %s", out, rev)
	}
	checkRuns(t, filepath.Join(dist, "ticketctl-linux-amd64"))
}

// checkRuns runs `<ticketctl> version`, or `--help` where this ticketctl
// has no version subcommand yet, and expects it to succeed.
func checkRuns(t *testing.T, ticketctl string) {
	t.Helper()
	out, err := exec.Command(ticketctl, "version").CombinedOutput()
	if err != nil && noVersionCommand(string(out)) {
		out, err = exec.Command(ticketctl, "--help").CombinedOutput()
	}
	if err != nil {
		t.Errorf("%s: %v: %s", ticketctl, err, out)
	}
}

// noVersionCommand reports whether out is ticketctl's refusal of an
// unknown "version" subcommand.
func noVersionCommand(out string) bool {
	return strings.Contains(out, "unknown") && strings.Contains(out, `"version"`)
}

// headRevision is HEAD's commit when the go command stamps it into
// binaries built here (it finds a repository whose .git is a directory,
// not a worktree's .git file), else "".
func headRevision(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat(filepath.Join(repoRoot, ".git")); err != nil || !fi.IsDir() {
		t.Logf("%s/.git is not a directory: the go command stamps no VCS revision", repoRoot)
		return ""
	}
	out, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// checkReleaseBinary checks one released binary's build settings, VCS
// revision (when rev is known) and executable format.
func checkReleaseBinary(t *testing.T, path, binary, goos, goarch, rev string) {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("%s is not executable (mode %v)", path, fi.Mode())
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "github.com/ticketd/ticketd/server/cmd/" + binary; bi.Path != want {
		t.Errorf("main package %s, want %s", bi.Path, want)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"GOOS": goos, "GOARCH": goarch, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[k] != v {
			t.Errorf("build setting %s=%q, want %q", k, settings[k], v)
		}
	}
	if rev != "" && settings["vcs.revision"] != rev {
		t.Errorf("vcs.revision %q, want HEAD %s", settings["vcs.revision"], rev)
	}

	switch goos {
	case "linux":
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if m := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]; f.Machine != m {
			t.Errorf("ELF machine %v, want %v", f.Machine, m)
		}
		if slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
			t.Errorf("ELF has an interpreter: dynamically linked")
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("ELF needs shared libraries %v", libs)
		}
	case "darwin":
		f, err := macho.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if f.Cpu != macho.CpuArm64 {
			t.Errorf("Mach-O cpu %v, want arm64", f.Cpu)
		}
	}
}

// checkSums checks dist/SHA256SUMS: one "<sha256 hex>  <name>" line per
// released file (sha256sum's text mode), exactly the files want, each digest
// that of the file; and `sha256sum -c` accepts it.
func checkSums(t *testing.T, dist string, want []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Errorf("SHA256SUMS line %q is not sha256sum's format", sc.Text())
			continue
		}
		names = append(names, m[2])
		if got, err := fileSHA256(filepath.Join(dist, m[2])); err != nil {
			t.Error(err)
		} else if got != m[1] {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", m[2], got, m[1])
		}
	}
	slices.Sort(names)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(names, want) {
		t.Errorf("SHA256SUMS lists %v, want %v", names, want)
	}
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Log("no sha256sum here: not running sha256sum -c")
		return
	}
	cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
	cmd.Dir = dist
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	}
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
