package backends

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileDurably replaces the file at path with data so that a crash at
// any point leaves either the old file or the whole new one: a temporary
// file beside it (mode DataFileMode, its name ending in ".tmp") is written
// and synced, renamed over path, and the directory synced (a rename is
// durable only once its directory is). Errors are the file system's; the
// temporary file is removed on error. Concurrent calls for different paths
// in one directory are safe (each has its own temporary file).
func WriteFileDurably(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(DataFileMode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes the entries of dir durable: files created, renamed or
// removed in it since the last sync (fsync of the directory itself).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
