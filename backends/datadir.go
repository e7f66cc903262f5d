package backends

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Modes of everything a backend keeps under its data dir, whatever the
// process umask: the Raft log, stable state and snapshots are readable and
// writable by the node's user only (PostgreSQL and etcd refuse or fix looser
// data dirs for the same reason: a local user who can rewrite the log can
// fork the replicated state).
const (
	// DataDirMode is the mode of the data dir and every directory below it.
	DataDirMode fs.FileMode = 0o700
	// DataFileMode is the mode of every file below the data dir.
	DataFileMode fs.FileMode = 0o600
)

// DataDirModeError is the error of PrepareDataDir for a data dir that is
// writable by group or others. errors.Is(err, ErrInsecureDataDir) is true.
type DataDirModeError struct {
	// Dir is the data dir; Mode its permission bits.
	Dir  string
	Mode fs.FileMode
}

func (e *DataDirModeError) Error() string {
	return fmt.Sprintf("backends: data dir %s has mode %04o, writable by group or others; refusing to start (chmod 700 %s)",
		e.Dir, e.Mode.Perm(), e.Dir)
}

// Is reports whether target is ErrInsecureDataDir.
func (e *DataDirModeError) Is(target error) bool { return target == ErrInsecureDataDir }

// PrepareDataDir makes dir ready for a backend before anything is opened in
// it: a missing dir (and missing parents) is created with DataDirMode, an
// existing one writable by group or others is refused with a
// *DataDirModeError, an existing one merely readable by others is tightened
// to DataDirMode, and then RestrictTree fixes whatever it holds. The umask
// plays no part: modes are set with chmod after creation.
//
// Errors: a *DataDirModeError (ErrInsecureDataDir), or the file system's
// error, wrapped. Safe to call from any goroutine, but not concurrently with
// another node on the same dir.
func PrepareDataDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := mkdirDurable(dir); err != nil {
			return fmt.Errorf("backends: create data dir %s: %w", dir, err)
		}
	case err != nil:
		return fmt.Errorf("backends: data dir %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("backends: data dir %s: not a directory", dir)
	case fi.Mode().Perm()&0o022 != 0:
		return &DataDirModeError{Dir: dir, Mode: fi.Mode().Perm()}
	}
	return RestrictTree(dir)
}

// mkdirDurable creates dir and its missing parents with DataDirMode and
// syncs the directory holding each new one: a new directory's name is
// durable only once its parent is synced (fsync(2)), and without that a
// power cut soon after a node's first start could take the whole data dir,
// with entries the node had acknowledged, and let it start empty.
func mkdirDurable(dir string) error {
	var made []string // the directories MkdirAll is about to create, deepest first
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, DataDirMode); err != nil {
		return err
	}
	for _, d := range made {
		if err := SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// RestrictTree sets dir and every directory below it to DataDirMode and every
// regular file below it to DataFileMode, where they differ. Libraries create
// their files with 0666 or 0644 and directories with 0755 filtered by the
// umask (badger's tables and value log, hashicorp's FileSnapshotStore), so
// the backends call it after opening their storage and after each snapshot.
// Symbolic links are left alone. A file that vanishes meanwhile (badger
// compaction, snapshot retention) is skipped.
//
// Errors: the first chmod or walk error, wrapped.
func RestrictTree(dir string) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		var want fs.FileMode
		switch {
		case d.IsDir():
			want = DataDirMode
		case d.Type().IsRegular():
			want = DataFileMode
		default:
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm() == want {
			return nil
		}
		if err := os.Chmod(path, want); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("backends: restrict modes under %s: %w", dir, err)
	}
	return nil
}
