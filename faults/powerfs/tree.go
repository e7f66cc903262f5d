package powerfs

import (
	"fmt"
	"maps"
	"sync"
	"syscall"
	"time"
)

// pageSize is the unit in which file data is kept and made durable: the
// page cache's, so a synced page is exactly what the kernel wrote back.
const pageSize = 4096

// Options shape what counts as durable (doc.go).
type Options struct {
	// Journal, when set, makes an fsync or fdatasync of any file, and an
	// fsync of any directory, also make durable every name created,
	// renamed or removed before it anywhere on the file system, as the
	// journal commit of ext4 (data=ordered) and XFS does. Unset, only an
	// fsync of the directory itself does (fsync(2), POSIX).
	Journal bool
}

// node is one file or directory, with its live state (what processes see
// now) and its durable state (what a power cut leaves).
type node struct {
	ino          uint64
	mode         uint32 // file type and permission bits, as stat(2)'s st_mode
	uid, gid     uint32
	mtime, ctime time.Time
	// open counts the handles open on a regular file; an unlinked file
	// stays readable through them.
	open int

	// Directories: the entries processes see, and those of the last fsync
	// of the directory.
	entries, durableEntries map[string]*node

	// Regular files: size and pages (a missing page reads as zeros), as
	// processes see them and as of the last sync. A page in dirty is the
	// live view's own copy; every other live page is shared with
	// durablePages. removed holds the pages a truncation dropped from the
	// live view since the last sync. Bytes past size are always zero.
	size, durableSize   int64
	pages, durablePages map[int64][]byte
	dirty, removed      map[int64]bool
}

func (n *node) isDir() bool { return n.mode&syscall.S_IFMT == syscall.S_IFDIR }

// read copies the live bytes at off into dest and returns the part of dest
// filled (short at the end of the file).
func (n *node) read(dest []byte, off int64) []byte {
	if off >= n.size {
		return dest[:0]
	}
	end := min(off+int64(len(dest)), n.size)
	out := dest[:end-off]
	for pos := off; pos < end; {
		p, o := pos/pageSize, pos%pageSize
		k := min(end-pos, pageSize-o)
		if pg, ok := n.pages[p]; ok {
			copy(out[pos-off:pos-off+k], pg[o:o+k])
		} else {
			clear(out[pos-off : pos-off+k])
		}
		pos += k
	}
	return out
}

// writablePage returns the live view's own copy of page p, copying it from
// the page it shares with the durable view (or a zero page for a hole).
func (n *node) writablePage(p int64) []byte {
	if n.dirty[p] {
		return n.pages[p]
	}
	pg := make([]byte, pageSize)
	copy(pg, n.pages[p])
	n.pages[p] = pg
	n.dirty[p] = true
	return pg
}

// write stores data at off in the live view, growing the file if it ends
// past its size.
func (n *node) write(data []byte, off int64) {
	end := off + int64(len(data))
	for pos := off; pos < end; {
		p, o := pos/pageSize, pos%pageSize
		k := min(end-pos, pageSize-o)
		copy(n.writablePage(p)[o:o+k], data[pos-off:pos-off+k])
		pos += k
	}
	n.size = max(n.size, end)
	n.mtime = time.Now()
}

// truncate sets the live size; bytes past a smaller size are dropped (and
// read as zeros if the file grows again).
func (n *node) truncate(size int64) {
	if size < n.size {
		keep := (size + pageSize - 1) / pageSize // pages from keep on lie wholly past size
		for p := range n.pages {
			if p >= keep {
				delete(n.pages, p)
				delete(n.dirty, p)
				n.removed[p] = true
			}
		}
		if o := size % pageSize; o != 0 {
			if _, ok := n.pages[size/pageSize]; ok {
				clear(n.writablePage(size / pageSize)[o:])
			}
		}
	}
	n.size = size
	n.mtime = time.Now()
}

// syncData makes the live data and size of a regular file durable.
func (n *node) syncData() {
	for p := range n.dirty {
		n.durablePages[p] = n.pages[p]
	}
	for p := range n.removed {
		if _, ok := n.pages[p]; !ok {
			delete(n.durablePages, p)
		}
	}
	clear(n.dirty)
	clear(n.removed)
	n.durableSize = n.size
}

// Loss says what a Cut dropped, and what was synced before it.
type Loss struct {
	// Files counts the regular files whose data or size went back to their
	// last sync; Pages the pages written since their file's last sync.
	Files, Pages int
	// Dirs counts the directories whose entries went back to their last
	// fsync.
	Dirs int
	// FileSyncs and DirSyncs count the syncs of files (fsync, fdatasync,
	// msync, O_DSYNC writes) and of directories since the mount or the
	// previous cut.
	FileSyncs, DirSyncs int
}

func (l Loss) String() string {
	return fmt.Sprintf("%d unsynced pages of %d files, entries of %d dirs (after %d file and %d dir syncs)",
		l.Pages, l.Files, l.Dirs, l.FileSyncs, l.DirSyncs)
}

// cut puts n back to its durable state and says what that dropped.
func (n *node) cut(l *Loss) {
	if n.isDir() {
		if !maps.Equal(n.entries, n.durableEntries) {
			l.Dirs++
		}
		n.entries = maps.Clone(n.durableEntries)
		return
	}
	if len(n.dirty) > 0 || len(n.removed) > 0 || n.size != n.durableSize {
		l.Files++
		l.Pages += len(n.dirty)
	}
	n.pages = maps.Clone(n.durablePages)
	clear(n.dirty)
	clear(n.removed)
	n.size = n.durableSize
	n.open = 0
}

// tree is the whole file system; mu guards every node.
type tree struct {
	mu   sync.Mutex
	opts Options
	root *node
	// nodes holds every node that a name in either view, or an open
	// handle, may still reach (gc drops the others).
	nodes   map[uint64]*node
	nextIno uint64
	// renamed records a name change since the last journal commit
	// (Options.Journal).
	renamed bool
	// syncs counts the syncs since the mount or the last cut (Loss).
	fileSyncs, dirSyncs int
}

func newTree(opts Options) *tree {
	t := &tree{opts: opts, nodes: map[uint64]*node{}, nextIno: 1}
	// The root exists from the start, durably, as a file system's root
	// does from mkfs on; it is inode 1, FUSE's root.
	t.root = t.newNode(syscall.S_IFDIR|0o755, 0, 0)
	return t
}

func (t *tree) newNode(mode, uid, gid uint32) *node {
	now := time.Now()
	n := &node{ino: t.nextIno, mode: mode, uid: uid, gid: gid, mtime: now, ctime: now}
	t.nextIno++
	if n.isDir() {
		n.entries, n.durableEntries = map[string]*node{}, map[string]*node{}
	} else {
		n.pages, n.durablePages = map[int64][]byte{}, map[int64][]byte{}
		n.dirty, n.removed = map[int64]bool{}, map[int64]bool{}
	}
	t.nodes[n.ino] = n
	return n
}

// changed notes a name change in dir.
func (t *tree) changed(dir *node) {
	dir.mtime = time.Now()
	dir.ctime = dir.mtime
	t.renamed = true
}

// create adds a new file or directory of mode under name in dir.
func (t *tree) create(dir *node, name string, mode, uid, gid uint32) (*node, syscall.Errno) {
	if _, ok := dir.entries[name]; ok {
		return nil, syscall.EEXIST
	}
	n := t.newNode(mode, uid, gid)
	dir.entries[name] = n
	t.changed(dir)
	return n, 0
}

// remove takes name out of dir: a directory (rmdir, only when empty) when
// isDir, else a file (unlink).
func (t *tree) remove(dir *node, name string, isDir bool) syscall.Errno {
	n, ok := dir.entries[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case isDir && !n.isDir():
		return syscall.ENOTDIR
	case isDir && len(n.entries) > 0:
		return syscall.ENOTEMPTY
	case !isDir && n.isDir():
		return syscall.EISDIR
	}
	delete(dir.entries, name)
	t.changed(dir)
	return 0
}

// renameNoReplace is rename(2)'s RENAME_NOREPLACE flag.
const renameNoReplace = 1

// rename moves name in from to newName in to, replacing what is there (a
// file, or an empty directory) unless flags has RENAME_NOREPLACE. The
// kernel has already refused moving a directory below itself.
func (t *tree) rename(from *node, name string, to *node, newName string, flags uint32) syscall.Errno {
	if flags&^renameNoReplace != 0 {
		return syscall.EINVAL // RENAME_EXCHANGE, RENAME_WHITEOUT
	}
	n, ok := from.entries[name]
	if !ok {
		return syscall.ENOENT
	}
	if old, ok := to.entries[newName]; ok {
		switch {
		case old == n:
			return 0
		case flags&renameNoReplace != 0:
			return syscall.EEXIST
		case n.isDir() && !old.isDir():
			return syscall.ENOTDIR
		case !n.isDir() && old.isDir():
			return syscall.EISDIR
		case old.isDir() && len(old.entries) > 0:
			return syscall.ENOTEMPTY
		}
	}
	delete(from.entries, name)
	to.entries[newName] = n
	t.changed(from)
	t.changed(to)
	return 0
}

// syncFile makes a regular file's live data and size durable (fsync,
// fdatasync, msync MS_SYNC, an O_DSYNC write), and with Options.Journal
// every name change so far.
func (t *tree) syncFile(n *node) {
	t.fileSyncs++
	n.syncData()
	t.commitJournal()
}

// syncDir makes a directory's live entries durable (fsync of the
// directory), and with Options.Journal every name change so far.
func (t *tree) syncDir(dir *node) {
	t.dirSyncs++
	dir.durableEntries = maps.Clone(dir.entries)
	t.commitJournal()
	t.gc()
}

// commitJournal makes every directory's live entries durable when
// Options.Journal is set and a name changed since the last commit.
func (t *tree) commitJournal() {
	if !t.opts.Journal || !t.renamed {
		return
	}
	for _, n := range t.nodes {
		if n.isDir() {
			n.durableEntries = maps.Clone(n.entries)
		}
	}
	t.renamed = false
	t.gc()
}

// cut puts every node back to its durable state (all handles are gone:
// the file system was unmounted) and says what that dropped.
func (t *tree) cut() Loss {
	l := Loss{FileSyncs: t.fileSyncs, DirSyncs: t.dirSyncs}
	for _, n := range t.nodes {
		n.cut(&l)
	}
	t.fileSyncs, t.dirSyncs = 0, 0
	t.renamed = false
	t.gc()
	return l
}

// gc forgets the nodes that no name in either view reaches and no handle
// holds open, so that files removed for good free their pages.
func (t *tree) gc() {
	reached := map[*node]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if reached[n] {
			return
		}
		reached[n] = true
		for _, c := range n.entries {
			walk(c)
		}
		for _, c := range n.durableEntries {
			walk(c)
		}
	}
	walk(t.root)
	for ino, n := range t.nodes {
		if !reached[n] && n.open == 0 {
			delete(t.nodes, ino)
		}
	}
}

// usedPages counts the pages held in either view, for statfs.
func (t *tree) usedPages() uint64 {
	var used uint64
	for _, n := range t.nodes {
		used += uint64(len(n.pages) + len(n.durablePages))
	}
	return used
}
