package backends

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
)

// DiskUsage returns the bytes the files under dir occupy on disk
// (st_blocks × 512, as du counts: a preallocated but unwritten WAL segment
// counts as what it holds) and their apparent size (the sum of their
// lengths). Files removed while it walks (a compaction, a snapshot
// rotation going on) are skipped. Errors: the walk's, other than a file
// gone missing.
func DiskUsage(dir string) (allocated, apparent int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		} else {
			allocated += fi.Size()
		}
		apparent += fi.Size()
		return nil
	})
	return allocated, apparent, err
}
