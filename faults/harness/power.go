//go:build faults

package harness

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/ticketd/ticketd/faults/nemesis"
	"github.com/ticketd/ticketd/faults/powerfs"
)

var _ nemesis.PowerTarget = (*target)(nil)

// trailingLogsEnv names the environment variable a ticketd built with -tags
// faults reads backends.Config.TrailingLogs from
// (server/cmd/ticketd/faults_hook.go).
const trailingLogsEnv = "TICKETD_FAULTS_TRAILING_LOGS"

// powerTrailingLogs is the entries a node of a power-loss run keeps after
// each compaction: with a snapshot every 512 entries, a run of a few
// seconds compacts its log behind snapshots many times, so a power cut
// finds logs that start after index 1 and depend on their snapshot
// having survived.
const powerTrailingLogs = 128

// mountPower mounts a powerfs for the data dirs of t's cluster (each node
// makes its own dir in it, as on a fresh disk) and unmounts it when t ends:
// call it before the cluster starts, so that the cluster stops first. It
// skips t where FUSE cannot be mounted (not root, no /dev/fuse).
func mountPower(t *testing.T, opts powerfs.Options) (*powerfs.FS, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("power-loss runs need root to mount their FUSE file system (faults/powerfs)")
	}
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		t.Skipf("power-loss runs need /dev/fuse: %v", err)
	} else {
		_ = f.Close()
	}
	dir := t.TempDir()
	pfs, err := powerfs.Mount(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pfs.Unmount(); err != nil {
			t.Errorf("harness: %v", err)
		}
	})
	return pfs, dir
}

// powerState records what the power cuts of a target on powerfs dropped.
type powerState struct {
	mu   sync.Mutex
	cuts []powerfs.Loss
}

// CutPower drops every unsynced write on the nodes' powerfs (every node
// killed): powerfs.FS.Cut.
func (k *target) CutPower() error {
	if k.power == nil {
		return errors.New("harness: the nodes' data dirs are not on powerfs (Config.PowerLoss)")
	}
	loss, err := k.power.Cut()
	k.powerLog.mu.Lock()
	k.powerLog.cuts = append(k.powerLog.cuts, loss)
	k.powerLog.mu.Unlock()
	return err
}

// powerCuts returns what each power cut so far dropped.
func (k *target) powerCuts() []powerfs.Loss {
	k.powerLog.mu.Lock()
	defer k.powerLog.mu.Unlock()
	return append([]powerfs.Loss(nil), k.powerLog.cuts...)
}
