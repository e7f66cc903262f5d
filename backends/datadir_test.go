//go:build unix

package backends_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ticketd/ticketd/backends"
)

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestPrepareDataDir runs under umask 000, where every library default
// (0666 files, 0755 directories) stays as loose as it is.
func TestPrepareDataDir(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })

	t.Run("creates_missing_dir_0700", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "data")
		if err := backends.PrepareDataDir(dir); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, dir); m != 0o700 {
			t.Fatalf("mode %04o, want 0700", m)
		}
	})
	t.Run("tightens_readable_dir_and_contents", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		sub := filepath.Join(dir, "snapshots", "1-2-3")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(sub, "state.bin")
		if err := os.WriteFile(file, []byte("x"), 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := backends.PrepareDataDir(dir); err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]fs.FileMode{dir: 0o700, sub: 0o700, filepath.Dir(sub): 0o700, file: 0o600} {
			if m := mode(t, path); m != want {
				t.Errorf("%s: mode %04o, want %04o", path, m, want)
			}
		}
	})
	for _, tc := range []struct {
		name string
		mode fs.FileMode
	}{
		{"refuses_world_writable", 0o777},
		{"refuses_group_writable", 0o770},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			err := backends.PrepareDataDir(dir)
			var me *backends.DataDirModeError
			if !errors.Is(err, backends.ErrInsecureDataDir) || !errors.As(err, &me) || me.Mode != tc.mode {
				t.Fatalf("error %v, want *DataDirModeError with mode %04o", err, tc.mode)
			}
			if m := mode(t, dir); m != tc.mode {
				t.Fatalf("refused dir changed to %04o", m)
			}
		})
	}
}
