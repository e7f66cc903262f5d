package scale

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"time"
)

// Messages of a node's JSON log (ticketd's zap production format: "ts" in
// seconds since the epoch, "msg") that bound a promotion.
const (
	// msgHashicorpLeader is hashicorp/raft's line on winning an election.
	msgHashicorpLeader = "entering leader state"
	// msgEtcdLeader ends etcd raft's "<id> became leader at term <n>".
	msgEtcdLeader = "became leader at term"
	// msgPromoted is ticketd's line after a leadership change
	// (server/leadership.go), with "leader": true once the node is the
	// promoted leader: its barrier applied, lessor and queues started.
	msgPromoted = "leadership changed"
)

// logLine is the part of a log line promotionAfter reads.
type logLine struct {
	TS     float64         `json:"ts"`
	Msg    string          `json:"msg"`
	Leader json.RawMessage `json:"leader"`
}

// promotionAfter reads the JSON log at path and returns the time from the
// first Raft leadership line at or after since (either backend's library)
// to the first ticketd promotion line after it: the node's Raft leadership
// → promotion. ok is false when the file has no such pair (the node did
// not become leader then). Lines that are not JSON are skipped.
func promotionAfter(path string, since time.Time) (d time.Duration, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	from := float64(since.UnixNano()) / 1e9
	var won float64 // ts of the Raft leadership line; 0: none yet
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.TS < from {
			continue
		}
		switch {
		case l.Msg == msgHashicorpLeader || strings.HasSuffix(strings.TrimRightFunc(l.Msg, isDigitOrSpace), msgEtcdLeader):
			won = l.TS
		case won > 0 && l.Msg == msgPromoted && string(l.Leader) == "true":
			return time.Duration((l.TS - won) * float64(time.Second)), true, nil
		}
	}
	return 0, false, sc.Err()
}

// isDigitOrSpace reports whether r ends etcd's leadership message (" 7").
func isDigitOrSpace(r rune) bool { return r == ' ' || ('0' <= r && r <= '9') }
