package ticketdtest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// The environment variables that drive TestHangsWhenAsked.
const (
	hangEnv     = "TICKETD_TEST_HANG"
	hangPIDsEnv = "TICKETD_TEST_HANG_PIDS_DIR"
)

// TestHangsWhenAsked hangs on purpose, and only when TICKETD_TEST_HANG=1:
// scripts/check-test-limits.sh runs it through `make test`'s runner to show
// that go test's -timeout (or the suite's wall-clock limit) stops a hung
// test, that the output names it, and that the cluster it started does not
// outlive it (the nodes die with the test binary: Pdeathsig). It starts a
// real cluster, writes its nodes' process ids (one a line) to go.pids in
// the directory $TICKETD_TEST_HANG_PIDS_DIR when set, and waits on a Watch of a prefix nobody writes to,
// as a client waiting for a change that never comes does.
func TestHangsWhenAsked(t *testing.T) {
	if os.Getenv(hangEnv) != "1" {
		t.Skipf("hangs on purpose: set %s=1 (scripts/check-test-limits.sh)", hangEnv)
	}
	c := ticketdtest.Start(t, ticketdtest.Options{Backend: backend()})
	if dir := os.Getenv(hangPIDsEnv); dir != "" {
		var pids []string
		for i := range c.Len() {
			pids = append(pids, fmt.Sprint(c.Node(i).PID()))
		}
		if err := os.WriteFile(filepath.Join(dir, "go.pids"), []byte(strings.Join(pids, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := c.Lock(c.Leader(t)).Watch(context.Background(), &ticketv1.WatchRequest{Prefix: "hang/"})
	if err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
		t.Logf("unexpected event %v", stream.Msg())
	}
	t.Fatalf("the watch ended: %v", stream.Err())
}
