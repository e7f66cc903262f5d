package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// unitFile is a systemd unit file's settings: section, key, values in order
// (a key may be given more than once).
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.HasSuffix(line, `\`) {
				t.Fatalf("%s:%d: %q is not key=value in a section", path, n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

func (u unitFile) last(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// TestSystemdUnit checks deploy/systemd/ticketd.service: its hardening
// (a dedicated non-root user, ProtectSystem=strict, NoNewPrivileges, a
// StateDirectory that is the data dir, an explicit KillMode), that
// `systemd-analyze verify` finds nothing to say about it, that `systemd-analyze
// security` rates its exposure at most 2.0 ("OK"), and that ticketd accepts
// its ExecStart's flags.
func TestSystemdUnit(t *testing.T) {
	path := filepath.Join("systemd", "ticketd.service")
	u := parseUnit(t, path)
	svc := "Service"

	if user := u.last(svc, "User"); user == "" || user == "root" || user == "0" {
		t.Errorf("User=%q: want a dedicated user", user)
	}
	for k, want := range map[string]string{
		"ProtectSystem":   "strict",
		"NoNewPrivileges": "yes",
		"ProtectHome":     "yes",
		"PrivateTmp":      "yes",
		"KillMode":        "mixed",
	} {
		if got := u.last(svc, k); got != want {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}
	state := u.last(svc, "StateDirectory")
	if state == "" {
		t.Fatal("no StateDirectory: under ProtectSystem=strict the data dir would be read-only")
	}
	exec0 := strings.Fields(u.last(svc, "ExecStart"))
	if len(exec0) < 2 || exec0[0] != "/usr/local/bin/ticketd" || exec0[1] != "serve" {
		t.Fatalf("ExecStart=%v: want /usr/local/bin/ticketd serve ...", exec0)
	}
	dataDir := ""
	for i, a := range exec0 {
		if a == "--data-dir" && i+1 < len(exec0) {
			dataDir = exec0[i+1]
		}
	}
	if want := "/var/lib/" + state; dataDir != want {
		t.Errorf("ExecStart --data-dir %q, want the StateDirectory %s", dataDir, want)
	}

	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze is not installed (.ci/run installs systemd)")
		}
		t.Skip("systemd-analyze is not installed (apt-get install systemd)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the release's linux binaries do not run here")
	}
	// verify checks that ExecStart's program exists: the same unit with
	// the path of a ticketd built by `make release` in its place.
	ticketd := filepath.Join(release(t), "ticketd-linux-"+runtime.GOARCH)
	unit, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "ticketd.service")
	if err := os.WriteFile(local, []byte(strings.ReplaceAll(string(unit), exec0[0], ticketd)), 0o644); err != nil {
		t.Fatal(err)
	}
	// verify reports settings it cannot parse as warnings with exit status
	// 0: any output is a failure.
	if out, err := exec.Command("systemd-analyze", "verify", local).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	if out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--threshold=20", local).CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0 (%v)\n%s", err, out)
	}
	// ticketd parses ExecStart's flags (--help: parse them, then stop).
	if out, err := exec.Command(ticketd, append(exec0[1:], "--help")...).CombinedOutput(); err != nil {
		t.Errorf("%s %s --help: %v\n%s", ticketd, strings.Join(exec0[1:], " "), err, out)
	}
}
