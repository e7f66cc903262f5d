package etcd

import (
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

func msg(typ pb.MessageType, to, commit uint64, entries int) *pb.Message {
	m := &pb.Message{Type: typ.Enum(), To: new(to), Commit: new(commit)}
	for range entries {
		m.Entries = append(m.Entries, &pb.Entry{Data: []byte("x")})
	}
	return m
}

// TestCommitNotices: the leader holds a follower's empty MsgApp until a
// later MsgApp to that follower replaces it, another message to it must
// follow it, or the round after the one that held it ends
// (commitnotice.go); notices of other followers are left alone.
func TestCommitNotices(t *testing.T) {
	var c commitNotices
	if isCommitNotice(msg(pb.MsgApp, 2, 5, 1)) || isCommitNotice(msg(pb.MsgHeartbeat, 2, 5, 0)) || !isCommitNotice(msg(pb.MsgApp, 2, 5, 0)) {
		t.Fatal("isCommitNotice: only an empty MsgApp is a commit notice")
	}

	// A newer notice replaces an older one for the same follower.
	c.hold(msg(pb.MsgApp, 2, 5, 0), 1)
	c.hold(msg(pb.MsgApp, 2, 6, 0), 1)
	c.hold(msg(pb.MsgApp, 3, 6, 0), 1)
	if len(c.held) != 2 || c.held[0].m.GetCommit() != 6 {
		t.Fatalf("held %v, want one notice per follower, the newest", c.held)
	}

	// A MsgApp with entries to follower 2 carries the commit index: the
	// notice is dropped, follower 3's stays.
	if h := c.before(msg(pb.MsgApp, 2, 6, 3)); h != nil {
		t.Fatalf("before a MsgApp: %v, want the notice dropped", h)
	}
	if len(c.held) != 1 || c.held[0].m.GetTo() != 3 {
		t.Fatalf("held %v, want follower 3's notice only", c.held)
	}

	// A heartbeat to follower 3 must follow its notice.
	if h := c.before(msg(pb.MsgHeartbeat, 3, 6, 0)); h == nil || h.GetTo() != 3 || h.GetCommit() != 6 {
		t.Fatalf("before a heartbeat: %v, want follower 3's notice sent first", h)
	}
	if len(c.held) != 0 {
		t.Fatalf("held %v after both were settled", c.held)
	}

	// due: notices of earlier rounds go, this round's stay.
	c.hold(msg(pb.MsgApp, 2, 7, 0), 4)
	c.hold(msg(pb.MsgApp, 3, 8, 0), 5)
	out := c.due(5, nil)
	if len(out) != 1 || out[0].GetTo() != 2 || len(c.held) != 1 || c.held[0].m.GetTo() != 3 {
		t.Fatalf("due(5) = %v, held %v: want round 4's notice out, round 5's held", out, c.held)
	}
	out = c.due(^uint64(0), out[:0])
	if len(out) != 1 || out[0].GetTo() != 3 || len(c.held) != 0 {
		t.Fatalf("due(all) = %v, held %v: want every notice out", out, c.held)
	}
}
