package etcd

import (
	"errors"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/etcd/internal/raftstore"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// TestLowerWatermarkOnlyForOverwrites: a Ready whose entries extend the log
// writes nothing to the watermark before its Save (the pending Advance stays
// with the background writer), while one that overwrites a suffix lowers
// the mark synchronously first. The watermark is closed to tell the two
// apart: any write to it then fails with watermark.ErrClosed.
func TestLowerWatermarkOnlyForOverwrites(t *testing.T) {
	dir := t.TempDir()
	db, err := badgerlog.Open(dir, BackendName, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	store, err := raftstore.Open(db, badgerlog.SnapshotDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{cfg: backends.Config{DataDir: dir}, store: store, log: zap.NewNop()}
	if err := n.openWatermark(); err != nil {
		t.Fatal(err)
	}
	ents := func(from, to uint64) []*pb.Entry {
		var out []*pb.Entry
		for i := from; i <= to; i++ {
			out = append(out, &pb.Entry{Type: pb.EntryType_EntryNormal.Enum(), Term: new(uint64(1)), Index: new(i)})
		}
		return out
	}
	if err := store.Save(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(0))}, ents(1, 3), &pb.Snapshot{}); err != nil {
		t.Fatal(err)
	}
	if err := n.wm.Advance(3, 0); err != nil {
		t.Fatal(err)
	}
	if err := n.wm.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.lowerWatermark(ents(4, 5)); err != nil {
		t.Fatalf("an append wrote the watermark: %v", err)
	}
	if err := n.lowerWatermark(ents(3, 4)); !errors.Is(err, watermark.ErrClosed) {
		t.Fatalf("an overwrite of index 3 did not write the watermark: %v", err)
	}
}
