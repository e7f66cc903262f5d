package powerfs

import (
	"fmt"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted powerfs. Its methods are safe for concurrent use.
type FS struct {
	dir  string
	tree *tree

	mu     sync.Mutex // serialises Cut and Unmount
	server *fuse.Server
}

// Mount mounts an empty powerfs on dir, an existing empty directory. It
// needs root (or fusermount and /dev/fuse). Call Unmount when done: the
// mount outlives the process otherwise, broken.
func Mount(dir string, opts Options) (*FS, error) {
	f := &FS{dir: dir, tree: newTree(opts)}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

// Dir returns the mount point.
func (f *FS) Dir() string { return f.dir }

// mount serves the tree on f.dir with a fresh kernel state: no cached
// pages, entries or attributes.
func (f *FS) mount() error {
	root := &fnode{t: f.tree, n: f.tree.root}
	timeout := time.Second
	srv, err := fs.Mount(f.dir, root, &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName: "powerfs",
			Name:   "powerfs",
			// mount(2) directly when root, fusermount otherwise.
			DirectMount: true,
			// Only this file system changes its files, through the
			// kernel: no invalidation of cached pages on a changed mtime
			// (that would also unmap badger's mappings page by page).
			ExplicitDataCacheControl: true,
			// ENOSYS for every xattr call, so that the kernel stops asking
			// for security.capability on each write.
			DisableXAttrs: true,
			MaxWrite:      1 << 20,
		},
		EntryTimeout:   &timeout,
		AttrTimeout:    &timeout,
		RootStableAttr: &fs.StableAttr{Ino: f.tree.root.ino},
	})
	if err != nil {
		return fmt.Errorf("powerfs: mount %s: %w", f.dir, err)
	}
	f.server = srv
	return nil
}

// unmount unmounts f.dir, retrying for up to 30 s while the kernel still
// holds files the killed processes had open (their release is
// asynchronous).
func (f *FS) unmount() error {
	if f.server == nil {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f.server.Unmount()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("powerfs: unmount %s: %w", f.dir, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.server = nil
	return nil
}

// Cut simulates a power cut: it unmounts the file system (the kernel's
// cached pages go with it, dirty ones included), puts every file and
// directory back to its durable state (doc.go), and mounts it again on the
// same directory. Every process using the file system must have exited
// first (kill -9 and wait): unmounting fails while files are open. It
// returns what was dropped.
func (f *FS) Cut() (Loss, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.unmount(); err != nil {
		return Loss{}, err
	}
	f.tree.mu.Lock()
	loss := f.tree.cut()
	f.tree.mu.Unlock()
	return loss, f.mount()
}

// Unmount unmounts the file system for good; its content is gone.
func (f *FS) Unmount() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unmount()
}
