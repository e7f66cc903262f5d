//go:build unix

package backendtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// RunFileModes checks the modes of everything a backend writes under its data
// dir (docs/security.md#files-at-rest): with the process umask at 000, a node
// that commits enough entries to snapshot (and, with snapshotFiles, writes
// snapshot files under <data-dir>/snapshots) leaves every directory 0700 and
// every file 0600; and a data dir of mode 0777 is refused with
// backends.ErrInsecureDataDir. It changes the process umask while it runs:
// do not run it in parallel with other tests.
func RunFileModes(t *testing.T, open Factory, snapshotFiles bool) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })

	t.Run("modes_under_umask_000", func(t *testing.T) {
		ctx := testContext(t)
		c := NewCluster(t, open)
		c.Tune = func(cfg *backends.Config) {
			cfg.SnapshotThreshold = 4
			cfg.TrailingLogs = 4
		}
		p := c.Start(1)[0]
		l := c.WaitLeader()
		for i := 0; i < 40; i++ {
			mustGrant(ctx, t, l.Node(), fmt.Sprintf("mode-%d", i))
		}
		if snapshotFiles {
			c.waitFor("a snapshot file", func() bool {
				m, _ := filepath.Glob(filepath.Join(p.DataDir, "snapshots", "*", "state.bin"))
				return len(m) > 0
			})
		}
		c.Kill(p)
		var files int
		err := filepath.WalkDir(p.DataDir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			switch {
			case d.IsDir() && fi.Mode().Perm() != backends.DataDirMode:
				t.Errorf("dir %s has mode %04o, want 0700", path, fi.Mode().Perm())
			case d.Type().IsRegular() && fi.Mode().Perm() != backends.DataFileMode:
				t.Errorf("file %s has mode %04o, want 0600", path, fi.Mode().Perm())
			}
			if d.Type().IsRegular() {
				files++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if files == 0 {
			t.Fatal("no files under the data dir")
		}
	})

	t.Run("world_writable_data_dir_refused", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		cfg := backends.DefaultConfig()
		cfg.ID = "n1"
		cfg.RaftAddr = FreeAddr(t)
		cfg.DataDir = dir
		cfg.Bootstrap = []core.Member{{ID: "n1", RaftAddr: cfg.RaftAddr}}
		cfg.StateMachine = core.NewStateMachine()
		n, err := open(cfg)
		if err == nil {
			_ = n.Close()
			t.Fatal("node started on a data dir of mode 0777")
		}
		var me *backends.DataDirModeError
		if !errors.Is(err, backends.ErrInsecureDataDir) || !errors.As(err, &me) || me.Mode.Perm() != 0o777 {
			t.Fatalf("error %v, want a *DataDirModeError for mode 0777", err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 0 {
			t.Fatalf("refused data dir holds %d entries, want none", len(entries))
		}
	})
}
