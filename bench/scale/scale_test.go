package scale

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPromotionAfter reads Raft leadership → promotion from logs in
// ticketd's JSON format, as each backend's Raft library and the server
// write them: only lines at or after since count, a follower's leadership
// change (leader false) is not a promotion, and a log without a pair says
// so.
func TestPromotionAfter(t *testing.T) {
	since := time.Unix(1_800_000_000, 0)
	ts := func(d time.Duration) string {
		return fmt.Sprintf("%.6f", float64(since.Add(d).UnixNano())/1e9)
	}
	write := func(lines ...string) string {
		p := filepath.Join(t.TempDir(), "n.log")
		require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
		return p
	}
	tests := []struct {
		name  string
		lines []string
		want  time.Duration
		ok    bool
	}{
		{"hashicorp", []string{
			`{"level":"info","ts":` + ts(-time.Second) + `,"logger":"raft","msg":"entering leader state","leader":"n1"}`,
			`{"level":"info","ts":` + ts(-time.Second+time.Millisecond) + `,"msg":"leadership changed","leader":true,"term":2}`,
			`not json: a panic trace`,
			`{"level":"info","ts":` + ts(200*time.Millisecond) + `,"logger":"raft","msg":"entering leader state","leader":"n2"}`,
			`{"level":"info","ts":` + ts(212*time.Millisecond) + `,"msg":"leadership changed","leader":true,"term":3,"took":0.000004}`,
		}, 12 * time.Millisecond, true},
		{"etcd", []string{
			`{"level":"info","ts":` + ts(300*time.Millisecond) + `,"logger":"raft","msg":"2 became leader at term 7"}`,
			`{"level":"info","ts":` + ts(340*time.Millisecond) + `,"msg":"leadership changed","leader":true,"term":7}`,
		}, 40 * time.Millisecond, true},
		{"follower", []string{
			`{"level":"info","ts":` + ts(300*time.Millisecond) + `,"msg":"leadership changed","leader":false,"leader_id":"n3","term":7}`,
		}, 0, false},
		{"only_before_since", []string{
			`{"level":"info","ts":` + ts(-time.Second) + `,"logger":"raft","msg":"entering leader state"}`,
			`{"level":"info","ts":` + ts(-time.Second+time.Millisecond) + `,"msg":"leadership changed","leader":true,"term":2}`,
		}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, ok, err := promotionAfter(write(tc.lines...), since)
			require.NoError(t, err)
			require.Equal(t, tc.ok, ok)
			require.InDelta(t, tc.want.Seconds(), d.Seconds(), 1e-5)
		})
	}
	_, _, err := promotionAfter(filepath.Join(t.TempDir(), "missing.log"), since)
	require.Error(t, err)
}

// TestUsageOfThisProcess: RSS is read from /proc and a data dir's size
// counts its files' allocated blocks.
func TestUsageOfThisProcess(t *testing.T) {
	rss, err := rssBytes(os.Getpid())
	require.NoError(t, err)
	require.Greater(t, rss, int64(1<<20), "a Go test process holds more than 1 MB")
	_, err = rssBytes(0)
	require.Error(t, err)

	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "f"), make([]byte, 1<<20), 0o644))
	n, err := dirBytes(dir)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, int64(1<<20))
	sparse, err := os.Create(filepath.Join(dir, "sparse"))
	require.NoError(t, err)
	require.NoError(t, sparse.Truncate(64<<20))
	require.NoError(t, sparse.Close())
	m, err := dirBytes(dir)
	require.NoError(t, err)
	require.Less(t, m, n+(1<<20), "a preallocated but unwritten file counts as what it holds")
}

func TestSettingsValidate(t *testing.T) {
	require.NoError(t, Settings{Steps: []int{200, 500}}.Validate())
	for _, bad := range []Settings{
		{},
		{Steps: []int{500, 200}},
		{Steps: []int{200, 200}},
		{Steps: []int{0, 200}},
		{Steps: []int{200}, Sessions: 2},
		{Steps: []int{200}, Renewals: -1},
	} {
		require.ErrorIs(t, bad.Validate(), ErrInvalidConfig, "%+v", bad)
	}
	require.ErrorIs(t, Config{Settings: Settings{Steps: []int{1}}}.Validate(), ErrInvalidConfig, "binaries and dir required")
}
