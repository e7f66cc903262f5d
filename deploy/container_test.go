package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// podman runs podman with its own storage under dir (vfs: no overlay
// mounts needed), cgroups managed through cgroupfs (no systemd as PID 1)
// and runc where it is installed (crun refuses hosts whose cgroups are in
// hybrid mode, as on CI's machines), so the test leaves nothing in the
// host's image store.
type podman struct {
	t      *testing.T
	global []string
}

func newPodman(t *testing.T) *podman {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("podman is not installed (.ci/run installs it)")
		}
		t.Skip("podman is not installed (apt-get install podman runc)")
	}
	// Not t.TempDir: after `podman rm` returns, podman's cleanup process
	// (conmon's exit hook) may still be writing under storage for a moment,
	// and TempDir's single RemoveAll then fails the test with "directory
	// not empty"; the removal is retried for up to 30 s instead.
	dir, err := os.MkdirTemp("", "ticketd-podman-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("remove podman's storage %s: %v", dir, err)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	p := &podman{t: t, global: []string{
		"--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"),
		"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
	}}
	if _, err := exec.LookPath("runc"); err == nil {
		p.global = append(p.global, "--runtime", "runc")
	}
	return p
}

// run runs podman with args and returns its standard output; a failure
// ends the test with podman's whole output.
func (p *podman) run(args ...string) string {
	p.t.Helper()
	out, err := p.try(args...)
	if err != nil {
		p.t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (p *podman) try(args ...string) (string, error) {
	cmd := exec.Command("podman", append(slices.Clone(p.global), args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// runFlags are those of every container the test starts: no network but
// loopback, and resource limits no higher than the ones the test runs
// under (podman's defaults raise them, which an unprivileged sandbox such
// as CI's refuses).
var runFlags = []string{"--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}

// TestContainerImage builds deploy/container/Containerfile from the
// linux/amd64 binaries of `make release` and checks the image: it runs as
// a non-root user, `ticketd version` and ticketctl run in it, and a
// one-node ticketd serves there on a volume and grants a lock to ticketctl
// in the container, then stops cleanly on SIGTERM.
func TestContainerImage(t *testing.T) {
	p := newPodman(t)
	dist := release(t)
	containerfile, err := filepath.Abs(filepath.Join("container", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	const image = "localhost/ticketd-test:latest"
	p.run("build", "--network", "none", "--platform", "linux/amd64", "-f", containerfile, "-t", image, dist)

	if user := strings.TrimSpace(p.run("image", "inspect", "--format", "{{.Config.User}}", image)); user == "" || user == "0" || strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0:") {
		t.Errorf("image user %q: want a non-root uid", user)
	}
	out := p.run(append(append([]string{"run", "--rm"}, runFlags...), image, "ticketd", "version")...)
	if !strings.HasPrefix(out, "ticketd ") {
		t.Errorf("ticketd version in the image: %q", out)
	}
	// ticketctl version, or --help where ticketctl has no version yet.
	if out, err := p.try(append(append([]string{"run", "--rm"}, runFlags...), image, "ticketctl", "version")...); err != nil {
		if !noVersionCommand(out) {
			t.Errorf("ticketctl version in the image: %v: %s", err, out)
		}
		p.run(append(append([]string{"run", "--rm"}, runFlags...), image, "ticketctl", "--help")...)
	}

	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give the container's uid a volume to serve from")
	}
	// The image's own command (ticketd serve) on a volume owned by its uid,
	// API on the container's loopback.
	vol := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(vol, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(vol, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("ticketd-test-%d", os.Getpid())
	// As deploy/kubernetes/statefulset.yaml runs it: a read-only root
	// (no /tmp either), no capabilities, no privilege escalation.
	p.run(append(append([]string{"run", "-d", "--name", name}, runFlags...),
		"--read-only", "--read-only-tmpfs=false", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"-v", vol+":/var/lib/ticketd", image)...)
	defer p.try("rm", "-f", "-t", "0", name)

	// A lock acquired through ticketctl in the container: the node elected
	// itself, committed the grant and wrote it to the volume.
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := p.try("exec", name, "ticketctl", "--endpoints", "127.0.0.1:7001", "--timeout", "5s",
			"lock", "acquire", "deploy/container", "--ttl", "60s")
		if err == nil {
			t.Logf("ticketctl lock acquire in the container: %s", out)
			break
		}
		if time.Now().After(deadline) {
			logs, _ := p.try("logs", name)
			t.Fatalf("ticketctl lock acquire in the container: %v\n%s\nticketd's log:\n%s", err, out, logs)
		}
		time.Sleep(time.Second)
	}
	if _, err := os.Stat(filepath.Join(vol, "data")); err != nil {
		t.Errorf("no data dir on the volume: %v", err)
	}
	p.run("stop", "-t", "30", name)
	if code := strings.TrimSpace(p.run("inspect", "--format", "{{.State.ExitCode}}", name)); code != "0" {
		logs, _ := p.try("logs", name)
		t.Errorf("ticketd exited %s on SIGTERM, want 0; its log:\n%s", code, logs)
	}
}
