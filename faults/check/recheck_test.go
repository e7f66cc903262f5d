package check_test

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/ticketd/ticketd/faults/check"
	"github.com/ticketd/ticketd/faults/history"
)

var recheck = flag.String("history", "", "a history.jsonl to check again (TestRecheck); skipped when empty")

// TestRecheck checks a stored history offline:
//
//	go test ./check -run TestRecheck -args -history=/path/to/history.jsonl
func TestRecheck(t *testing.T) {
	if *recheck == "" {
		t.Skip("no -history given")
	}
	f, err := os.Open(*recheck)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ops, err := history.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	r := check.Run(check.Input{Ops: ops, Timeout: 10 * time.Minute})
	t.Logf("%d ops, linearizability %v in %v", len(ops), r.Linearizability.Result, r.Linearizability.Elapsed)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}
