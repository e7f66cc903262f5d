//go:build linux

package hosts

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWatchExit checks that a node process's exit leaves a line in its log
// and that only an exit this package did not cause is reported as
// unexpected (a fault run once had a node die at 7.3 s without a word, taken
// for a node that never campaigned). A real process (sleep) is killed.
func TestWatchExit(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("needs the sleep command")
	}
	tests := []struct {
		name       string
		byCluster  bool // SIGKILL through Cluster.signal, as Kill and Close send it
		wantLevel  string
		unexpected bool
	}{
		{name: "killed_from_outside", byCluster: false, wantLevel: "warn", unexpected: true},
		{name: "killed_by_cluster", byCluster: true, wantLevel: "info", unexpected: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &Node{ID: "n9", LogFile: filepath.Join(t.TempDir(), "n9.log")}
			c := &Cluster{t: t, nodes: []*Node{n}}
			logf, err := os.OpenFile(n.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sleep", "60")
			cmd.Stdout, cmd.Stderr = logf, logf
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			n.mu.Lock()
			n.cmd, n.exited = cmd, exited
			n.mu.Unlock()
			go n.watchExit(cmd, logf, exited)

			if tt.byCluster {
				c.signal(0, syscall.SIGKILL)
			} else if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if !c.wait(0, time.Minute) {
				t.Fatal("sleep did not exit after SIGKILL")
			}

			b, err := os.ReadFile(n.LogFile)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			var rec exitRecord
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil {
				t.Fatalf("last log line %q: %v", lines[len(lines)-1], err)
			}
			if rec.Msg != "process exited" || rec.Node != "n9" || rec.PID != cmd.Process.Pid ||
				rec.Status != "signal: killed" || rec.Level != tt.wantLevel || rec.Expected == tt.unexpected {
				t.Errorf("exit record %+v; want process exited, n9, pid %d, signal: killed, level %s, expected %v",
					rec, cmd.Process.Pid, tt.wantLevel, !tt.unexpected)
			}
			got := n.UnexpectedExit()
			if (got != "") != tt.unexpected || (tt.unexpected && !strings.Contains(got, "signal: killed")) {
				t.Errorf("UnexpectedExit() = %q; want unexpected %v", got, tt.unexpected)
			}
		})
	}
}
