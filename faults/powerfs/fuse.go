package powerfs

import (
	"context"
	"maps"
	"slices"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fnode is the go-fuse inode of a node; every operation takes the tree's
// lock and works on the node.
type fnode struct {
	fs.Inode
	t *tree
	n *node
}

var (
	_ fs.NodeLookuper  = (*fnode)(nil)
	_ fs.NodeReaddirer = (*fnode)(nil)
	_ fs.NodeGetattrer = (*fnode)(nil)
	_ fs.NodeSetattrer = (*fnode)(nil)
	_ fs.NodeCreater   = (*fnode)(nil)
	_ fs.NodeMkdirer   = (*fnode)(nil)
	_ fs.NodeUnlinker  = (*fnode)(nil)
	_ fs.NodeRmdirer   = (*fnode)(nil)
	_ fs.NodeRenamer   = (*fnode)(nil)
	_ fs.NodeOpener    = (*fnode)(nil)
	_ fs.NodeReader    = (*fnode)(nil)
	_ fs.NodeWriter    = (*fnode)(nil)
	_ fs.NodeFsyncer   = (*fnode)(nil)
	_ fs.NodeFlusher   = (*fnode)(nil)
	_ fs.NodeReleaser  = (*fnode)(nil)
	_ fs.NodeAllocater = (*fnode)(nil)
	_ fs.NodeStatfser  = (*fnode)(nil)
)

// handle is an open regular file; sync is set for O_DSYNC and O_SYNC.
type handle struct {
	n        *node
	sync     bool
	released bool
}

// attr fills a with n's attributes.
func attr(n *node, a *fuse.Attr) {
	a.Ino = n.ino
	a.Mode = n.mode
	a.Uid, a.Gid = n.uid, n.gid
	a.Blksize = pageSize
	if n.isDir() {
		a.Nlink = 2
		a.Size = pageSize
	} else {
		a.Nlink = 1
		a.Size = uint64(n.size)
		a.Blocks = uint64(len(n.pages)) * pageSize / 512
	}
	a.SetTimes(&n.mtime, &n.mtime, &n.ctime)
}

// stable returns the identity go-fuse knows n by: its inode number and
// file type. t.mu is held.
func stable(n *node) fs.StableAttr {
	return fs.StableAttr{Mode: n.mode & syscall.S_IFMT, Ino: n.ino}
}

// inode returns the go-fuse inode of c (identity st), a child of f. It is
// called without t.mu: go-fuse takes a lock of its own, which it may also
// hold while it calls into fnode.
func (f *fnode) inode(ctx context.Context, c *node, st fs.StableAttr) *fs.Inode {
	return f.NewInode(ctx, &fnode{t: f.t, n: c}, st)
}

func (f *fnode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	f.t.mu.Lock()
	c := f.n.entries[name]
	if c == nil {
		f.t.mu.Unlock()
		return nil, syscall.ENOENT
	}
	attr(c, &out.Attr)
	st := stable(c)
	f.t.mu.Unlock()
	return f.inode(ctx, c, st), 0
}

func (f *fnode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	if !f.n.isDir() {
		return nil, syscall.ENOTDIR
	}
	list := make([]fuse.DirEntry, 0, len(f.n.entries))
	for _, name := range slices.Sorted(maps.Keys(f.n.entries)) {
		c := f.n.entries[name]
		list = append(list, fuse.DirEntry{Name: name, Mode: c.mode, Ino: c.ino})
	}
	return fs.NewListDirStream(list), 0
}

func (f *fnode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	attr(f.n, &out.Attr)
	return 0
}

func (f *fnode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	n := f.n
	if size, ok := in.GetSize(); ok {
		if n.isDir() {
			return syscall.EISDIR
		}
		n.truncate(int64(size))
	}
	if mode, ok := in.GetMode(); ok {
		n.mode = n.mode&syscall.S_IFMT | mode&0o7777
	}
	if uid, ok := in.GetUID(); ok {
		n.uid = uid
	}
	if gid, ok := in.GetGID(); ok {
		n.gid = gid
	}
	if mtime, ok := in.GetMTime(); ok {
		n.mtime = mtime
	}
	n.ctime = time.Now()
	attr(n, &out.Attr)
	return 0
}

// owner returns the uid and gid of the process that made a request.
func owner(ctx context.Context) (uint32, uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}

// open returns a handle on regular file n opened with flags.
func (t *tree) open(n *node, flags uint32) *handle {
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		n.truncate(0)
	}
	n.open++
	return &handle{n: n, sync: flags&syscall.O_DSYNC != 0}
}

func (f *fnode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	uid, gid := owner(ctx)
	f.t.mu.Lock()
	c := f.n.entries[name]
	var errno syscall.Errno
	switch {
	case c == nil:
		c, errno = f.t.create(f.n, name, syscall.S_IFREG|mode&0o7777, uid, gid)
	case flags&syscall.O_EXCL != 0:
		errno = syscall.EEXIST
	case c.isDir():
		errno = syscall.EISDIR
	}
	if errno != 0 {
		f.t.mu.Unlock()
		return nil, nil, 0, errno
	}
	h := f.t.open(c, flags)
	attr(c, &out.Attr)
	st := stable(c)
	f.t.mu.Unlock()
	return f.inode(ctx, c, st), h, fuse.FOPEN_KEEP_CACHE, 0
}

func (f *fnode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	uid, gid := owner(ctx)
	f.t.mu.Lock()
	c, errno := f.t.create(f.n, name, syscall.S_IFDIR|mode&0o7777, uid, gid)
	if errno != 0 {
		f.t.mu.Unlock()
		return nil, errno
	}
	attr(c, &out.Attr)
	st := stable(c)
	f.t.mu.Unlock()
	return f.inode(ctx, c, st), 0
}

func (f *fnode) Unlink(ctx context.Context, name string) syscall.Errno {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	return f.t.remove(f.n, name, false)
}

func (f *fnode) Rmdir(ctx context.Context, name string) syscall.Errno {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	return f.t.remove(f.n, name, true)
}

func (f *fnode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	to, ok := newParent.(*fnode)
	if !ok {
		return syscall.EXDEV
	}
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	return f.t.rename(f.n, name, to.n, newName, flags)
}

func (f *fnode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	if f.n.isDir() {
		return nil, 0, syscall.EISDIR
	}
	// FOPEN_KEEP_CACHE: only this file system changes the files, through
	// the kernel, so its page cache stays right across opens (and a cut
	// unmounts, which drops it).
	return f.t.open(f.n, flags), fuse.FOPEN_KEEP_CACHE, 0
}

func (f *fnode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	return fuse.ReadResultData(f.n.read(dest, off)), 0
}

func (f *fnode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	f.n.write(data, off)
	if h, ok := fh.(*handle); ok && h.sync {
		f.t.syncFile(f.n)
	}
	return uint32(len(data)), 0
}

// Fsync serves fsync(2) and fdatasync(2) of a file (and msync(2) MS_SYNC,
// which the kernel turns into one) and fsync(2) of a directory.
func (f *fnode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	if f.n.isDir() {
		f.t.syncDir(f.n)
	} else {
		f.t.syncFile(f.n)
	}
	return 0
}

// Flush (close(2)) makes nothing durable.
func (f *fnode) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }

func (f *fnode) Release(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	if h, ok := fh.(*handle); ok && !h.released {
		h.released = true
		h.n.open--
	}
	return 0
}

// fallocKeepSize is fallocate(2)'s FALLOC_FL_KEEP_SIZE.
const fallocKeepSize = 1

// Allocate serves fallocate(2) mode 0 (the file grows to off+size if
// shorter; the new bytes read as zeros) and FALLOC_FL_KEEP_SIZE (nothing
// to do: space is never short here); the new size is durable on the next
// sync, like a write's.
func (f *fnode) Allocate(ctx context.Context, fh fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	if mode&^fallocKeepSize != 0 {
		return syscall.EOPNOTSUPP
	}
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	if end := int64(off + size); mode&fallocKeepSize == 0 && end > f.n.size {
		f.n.size = end
		f.n.mtime = time.Now()
	}
	return 0
}

// totalPages is the size statfs reports, 64 GiB: more than the stores'
// free-space checks ask for, so that none stops a node.
const totalPages = 1 << 24

func (f *fnode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	free := uint64(totalPages) - min(f.t.usedPages(), totalPages)
	out.Blocks, out.Bfree, out.Bavail = totalPages, free, free
	out.Files, out.Ffree = 1<<20, 1<<20-uint64(len(f.t.nodes))
	out.Bsize, out.Frsize, out.NameLen = pageSize, pageSize, 255
	return 0
}
