// Package powerfs is a FUSE file system (github.com/hanwen/go-fuse/v2) that
// keeps every write apart until it is made durable and drops what was not at
// a simulated power cut, as LazyFS does for Jepsen: the fault harness puts
// the nodes' data dirs on it, kills every node, calls Cut, and starts them
// again on what a machine would find on its disk after losing power.
//
// The whole file system lives in the test process's memory: for each file
// and directory a live state (what processes see) and a durable state (what
// survives a cut). Nothing reaches a real disk.
//
// # What is durable
//
// File data is kept in 4 KiB pages, the page cache's unit. These calls make
// a file's data durable, and its size with it:
//
//   - fsync(2) and fdatasync(2) on the file (FUSE_FSYNC; fdatasync is not
//     told apart: size and data are what either must keep);
//   - msync(2) with MS_SYNC on a shared mapping of it: the kernel writes the
//     dirty pages back to the file system (FUSE_WRITE), then sends
//     FUSE_FSYNC for the file, so this is the fsync case above (badger's
//     memtable write-ahead log and value log are written this way);
//   - a write(2) through a descriptor opened with O_DSYNC or O_SYNC (the
//     write is durable when it returns; the kernel also sends FUSE_FSYNC).
//
// Nothing else is: not close(2) (FUSE_FLUSH, FUSE_RELEASE), not the kernel's
// own writeback of dirty pages (FUSE_WRITE without a later fsync), not
// sync_file_range(2), not syncfs(2) (FUSE has no such request for this kind
// of mount). Files are mounted without direct_io and without the writeback
// cache: write(2) reaches the file system at once, shared writable mmap works
// (its dirty pages arrive as FUSE_WRITE when the kernel writes them back),
// and nothing the kernel holds back outlives the unmount at a cut.
//
// Names are durable only through fsync(2) of their directory (FUSE_FSYNCDIR),
// the POSIX minimum (fsync(2): "Calling fsync() does not necessarily ensure
// that the entry in the directory containing the file has also reached disk.
// For that an explicit fsync() on a file descriptor for the directory is
// also needed."): creat, mkdir, rename, unlink and rmdir change the live
// directory, and a directory's fsync makes its entries as they are now the
// durable ones. With Options.Journal set, an fsync of any file (or
// directory) also makes every earlier name change on the whole file system
// durable, as the journal commit of ext4 and XFS does.
//
// # What a cut loses
//
// Cut (with every process using the file system killed) unmounts it, which
// discards the kernel's page cache, dirty pages included, and then:
//
//   - every file goes back to its data and size as of its last sync: pages
//     written since are dropped, a truncation since is undone, a file never
//     synced is empty;
//   - every directory goes back to its entries as of its last fsync: a file
//     created since vanishes (whatever its own syncs), a file removed since
//     comes back, a rename since is undone in each directory on its own (a
//     rename within one directory is all or nothing; across two, whichever
//     of the two directories was synced keeps its side);
//
// then it mounts the file system again on the same directory. Permission
// bits, owners and times are kept as they are (no store here depends on
// them). Hard links, symbolic links, device nodes, extended attributes,
// RENAME_EXCHANGE and fallocate modes other than plain allocation and
// FALLOC_FL_KEEP_SIZE are refused.
package powerfs
