package nemesis_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/faults/nemesis"
)

// fakeDiskTarget is a fakeTarget with disk faults (nemesis.DiskTarget);
// exited and why are what Exited reports, logEnd what LogEnd reports, one
// value a call (the last one from then on).
type fakeDiskTarget struct {
	fakeTarget
	exited bool
	why    string
	logEnd []uint64
}

func (f *fakeDiskTarget) DamageLog(i int) (func() error, error) {
	_ = f.log("damage %d", i)
	return func() error { return f.log("restore %d", i) }, nil
}
func (f *fakeDiskTarget) FillDisk(i int) error      { return f.log("fill %d", i) }
func (f *fakeDiskTarget) FreeDisk(i int) error      { return f.log("free %d", i) }
func (f *fakeDiskTarget) Exited(int) (bool, string) { return f.exited, f.why }
func (f *fakeDiskTarget) LogEnd(int) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.logEnd) == 0 {
		return 0, nil
	}
	end := f.logEnd[0]
	if len(f.logEnd) > 1 {
		f.logEnd = f.logEnd[1:]
	}
	return end, nil
}

func TestExecutorDiskFaults(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	cases := []struct {
		name    string
		fault   nemesis.Fault
		exited  bool
		why     string
		logEnd  []uint64
		want    []string
		wantErr string
	}{
		{"damage_log_refused", nemesis.Fault{Kind: nemesis.DamageLog, Duration: ms, Pick: 2}, true, "refusing to start", nil,
			[]string{"kill 2", "damage 2", "start 2", "kill 2", "restore 2", "start 2"}, ""},
		{"damage_log_other_exit", nemesis.Fault{Kind: nemesis.DamageLog, Duration: ms, Pick: 2}, true, "fatal: disk full", nil,
			[]string{"kill 2", "damage 2", "start 2", "kill 2", "restore 2", "start 2"}, "without refusing to start"},
		{"disk_full_stopped", nemesis.Fault{Kind: nemesis.DiskFull, Duration: ms, Pick: 1}, true, "fatal: disk full", []uint64{10},
			[]string{"kill 1", "fill 1", "start 1", "kill 1", "free 1", "start 1"}, ""},
		{"disk_full_not_noticed", nemesis.Fault{Kind: nemesis.DiskFull, Duration: ms, Pick: 1}, true, "fatal: SIGBUS", []uint64{10},
			[]string{"kill 1", "fill 1", "start 1", "kill 1", "free 1", "start 1"}, "exited without saying the disk is full"},
		// A node that goes on appending on a full disk is caught by its
		// watermark, even when the run ends first.
		{"disk_full_appended", nemesis.Fault{Kind: nemesis.DiskFull, Duration: ms, Pick: 1}, false, "", []uint64{10, 12},
			[]string{"kill 1", "fill 1", "start 1", "kill 1", "free 1", "start 1"}, "appended entries 11-12"},
		{"disk_full_panicked", nemesis.Fault{Kind: nemesis.DiskFull, Duration: ms, Pick: 1}, true, `panic: failed to save current term: badgerlog: disk full`, []uint64{10},
			[]string{"kill 1", "fill 1", "start 1", "kill 1", "free 1", "start 1"}, "stopped with a Go panic"},
		{"disk_full_stopped_late", nemesis.Fault{Kind: nemesis.DiskFull, Duration: ms, Pick: 1}, true, "fatal: disk full", []uint64{10, 11},
			[]string{"kill 1", "fill 1", "start 1", "kill 1", "free 1", "start 1"}, "appended entries 11-11 (exited true)"},
		{"disk_full_not_exercised", nemesis.Fault{Kind: nemesis.DiskFull, Duration: ms, Pick: 1}, false, "", []uint64{10},
			[]string{"kill 1", "fill 1", "start 1", "kill 1", "free 1", "start 1"}, "not exercised"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ft := &fakeDiskTarget{fakeTarget: fakeTarget{n: 3, leader: 1}, exited: tc.exited, why: tc.why, logEnd: tc.logEnd}
			ex := nemesis.NewExecutor(ft, func() int64 { return 0 })
			// A node that never exits is waited for until the run ends:
			// 3 s, ample for a fault held 1 ms.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			ex.Run(ctx, nemesis.Schedule{Faults: []nemesis.Fault{tc.fault}})
			require.Equal(t, tc.want, ft.Calls())
			require.Len(t, ex.Events(), 1)
			if tc.wantErr == "" {
				require.Empty(t, ex.Events()[0].Err)
			} else {
				require.Contains(t, ex.Events()[0].Err, tc.wantErr)
			}
		})
	}
}

// TestHealAllDisk: HealAll undoes a disk fault a cancelled run left in
// effect, and a disk fault on a target without disks is skipped.
func TestHealAllDisk(t *testing.T) {
	t.Parallel()
	ft := &fakeDiskTarget{fakeTarget: fakeTarget{n: 3, leader: 1}, exited: true, why: "disk full"}
	ex := nemesis.NewExecutor(ft, func() int64 { return 0 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ex.Run(ctx, nemesis.Schedule{Faults: []nemesis.Fault{{Kind: nemesis.DiskFull, Duration: time.Hour}}})
	}()
	require.Eventually(t, func() bool { return len(ft.Calls()) == 3 }, 10*time.Second, time.Millisecond)
	cancel()
	<-done
	require.NoError(t, ex.HealAll(context.Background()))
	require.Equal(t, []string{"kill 0", "fill 0", "start 0", "kill 0", "free 0", "start 0"}, ft.Calls())

	plain := nemesis.NewExecutor(&fakeTarget{n: 3}, func() int64 { return 0 })
	plain.Run(context.Background(), nemesis.Schedule{Faults: []nemesis.Fault{{Kind: nemesis.DamageLog}}})
	require.Contains(t, plain.Events()[0].Err, "no disk faults")
}
