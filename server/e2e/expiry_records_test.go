package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// recordWait bounds the wait for the expiry records of leases found ended:
// a leader logs its record just after the Expire's apply, and a reader may
// see the removal first. A lease whose leader was killed in between has
// none, so this is a bound on a rare case, not a safety net to hit.
const recordWait = 5 * time.Second

// leaseName names a lease in the leaders' expiry records: a lock's own by
// key and token, or a session's by id.
type leaseName struct {
	key     string
	token   uint64
	session uint64
}

// expiryRecord is what the leader that expired a lease logged of it, the
// `lease expired` and `session expired` lines at debug level
// (docs/operations.md, ticketd_lease_expiry_lateness_seconds).
type expiryRecord struct {
	// late is how late its Expire applied: from the moment that leader
	// could first expire it (its deadline there, or its taking office) to
	// the apply.
	late time.Duration
	// office is when that leader took office (its promotion, after its
	// barrier applied); zero if unknown.
	office time.Time
}

// expiryLine is the part of an expiry record's JSON log line read here;
// zap's JSON encoder writes durations and times in seconds.
type expiryLine struct {
	Key     string  `json:"key"`
	Token   uint64  `json:"token"`
	Session uint64  `json:"session"`
	Late    float64 `json:"late"`
	Office  float64 `json:"office"`
}

// expiryRecords reads the expiry records of every node's log (a node's log
// holds all its runs) until one is found for each lease of want or
// recordWait has passed, and returns those found.
func expiryRecords(t *testing.T, c *ticketdtest.Cluster, want []leaseName) map[leaseName]expiryRecord {
	t.Helper()
	deadline := time.Now().Add(recordWait)
	for {
		got := readExpiryRecords(t, c)
		missing := 0
		for _, n := range want {
			if _, ok := got[n]; !ok {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readExpiryRecords reads the expiry records in every node's log once.
func readExpiryRecords(t *testing.T, c *ticketdtest.Cluster) map[leaseName]expiryRecord {
	t.Helper()
	out := map[leaseName]expiryRecord{}
	for i := range c.Len() {
		f, err := os.Open(c.Node(i).LogFile)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
		for sc.Scan() {
			b := sc.Bytes()
			if !bytes.Contains(b, []byte(`"msg":"lease expired"`)) && !bytes.Contains(b, []byte(`"msg":"session expired"`)) {
				continue
			}
			var line expiryLine
			if json.Unmarshal(b, &line) != nil {
				continue // a line cut short by a kill -9
			}
			rec := expiryRecord{late: time.Duration(line.Late * float64(time.Second))}
			if line.Office > 0 {
				rec.office = time.Unix(0, int64(line.Office*float64(time.Second)))
			}
			name := leaseName{session: line.Session}
			if line.Session == 0 {
				name = leaseName{key: line.Key, token: line.Token}
			}
			out[name] = rec
		}
		err = sc.Err()
		_ = f.Close()
		require.NoError(t, err)
	}
	return out
}
