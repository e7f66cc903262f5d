package etcd

// SetSnapshotHook makes the snapshot goroutine call fn with the snapshot's
// index before it encodes and writes the snapshot: a test blocks it there
// to show that the loop goes on meanwhile (snapshot.go).
func (n *Node) SetSnapshotHook(fn func(index uint64)) { n.snapshotHook.Store(&fn) }
