package suite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/scale"
)

func valid() Config {
	return Config{Backends: Backends(), Concurrency: []int{1, 4}, Duration: time.Second, Rounds: 2, Commit: true, Lock: true, Peer: true}
}

func TestValidate(t *testing.T) {
	require.NoError(t, valid().Validate())
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"unknown_backend", func(c *Config) { c.Backends = []string{"zookeeper"} }},
		{"unknown_log_store", func(c *Config) { c.LogStores = []string{"bolt"} }},
		{"no_levels", func(c *Config) { c.Concurrency = nil }},
		{"zero_level", func(c *Config) { c.Concurrency = []int{0} }},
		{"zero_rounds", func(c *Config) { c.Rounds = 0 }},
		{"zero_duration", func(c *Config) { c.Duration = 0 }},
		{"nothing_to_measure", func(c *Config) { c.Commit, c.Lock, c.Peer = false, false, false }},
		{"no_backends", func(c *Config) { c.Backends, c.Peer = nil, false }},
		{"zero_handoff_level", func(c *Config) { c.HandoffConcurrency = []int{2, 0} }},
		{"zero_shared_level", func(c *Config) { c.SharedConcurrency = []int{0} }},
		{"failover_only_without_backends", func(c *Config) {
			c.Commit, c.Lock, c.Peer, c.Backends, c.Failover = false, false, false, nil, true
		}},
		{"open_without_rate", func(c *Config) { c.Mode = load.ModeOpen }},
		{"scale_steps_not_increasing", func(c *Config) { c.Scale = &scale.Settings{Steps: []int{500, 200}} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.edit(&c)
			require.ErrorIs(t, c.Validate(), ErrInvalidConfig)
		})
	}
}

func TestBackendsInReportOrder(t *testing.T) {
	require.Equal(t, []string{"hashicorp", "etcd"}, Backends())
}

func TestRotate(t *testing.T) {
	xs := []string{"hashicorp", "etcd", "etcd-mutex"}
	require.Equal(t, xs, rotate(xs, 0))
	require.Equal(t, []string{"etcd", "etcd-mutex", "hashicorp"}, rotate(xs, 1))
	require.Equal(t, []string{"etcd-mutex", "hashicorp", "etcd"}, rotate(xs, 2))
	require.Equal(t, xs, rotate(xs, 3))
	require.Equal(t, []string{"hashicorp", "etcd"}, xs[:2], "input unchanged")
	require.Nil(t, rotate([]string(nil), 1))
}

func TestSteps(t *testing.T) {
	c := valid() // 2 rounds × (floor + 2 backends × 2 levels × 2 workloads + 2 peer levels)
	require.Equal(t, 2*(1+8+2), c.steps())
	c.Lock, c.Peer = false, false
	require.Equal(t, 2*(1+4), c.steps())

	// Handoff: 3 default levels per backend and for the peer; snapshots: on
	// and off per backend; failover: one step per backend, not per round.
	c = valid()
	c.Commit, c.Lock, c.Handoff, c.Snapshots, c.Failover = false, false, true, true, true
	require.Equal(t, 2*(1+3*3+2*2)+2, c.steps())
	c.HandoffConcurrency = []int{4}
	require.Equal(t, 2*(1+3*1+2*2)+2, c.steps())

	// Snapshots: on and off per backend and log store.
	c = valid()
	c.Commit, c.Lock, c.Peer, c.Snapshots = false, false, false, true
	c.LogStores = LogStores()
	require.Equal(t, 2*(1+2*2*2), c.steps())

	// Shared: four cases per backend at 3 default levels.
	c = valid()
	c.Commit, c.Lock, c.Peer, c.Shared = false, false, false, true
	require.Equal(t, 2*(1+2*4*3), c.steps())
	c.SharedConcurrency = []int{2}
	require.Equal(t, 2*(1+2*4*1), c.steps())

	// Scale: one step per backend, not per round.
	c = valid()
	c.Commit, c.Lock, c.Peer, c.Scale = false, false, false, &scale.Settings{Steps: []int{200, 500}}
	require.Equal(t, 2*1+2, c.steps())
}

func TestLoadAvg(t *testing.T) {
	require.GreaterOrEqual(t, loadAvg(), 0.0)
}

func TestMountOf(t *testing.T) {
	dev, fs := mountOf(t.TempDir())
	require.NotEmpty(t, dev)
	require.NotEmpty(t, fs)
}

// TestCommitTargets: the commit workload runs on every backend × log store
// the backend offers, the default store alone when none is listed.
func TestCommitTargets(t *testing.T) {
	c := valid()
	require.Equal(t, []commitTarget{{"hashicorp", "wal"}, {"etcd", "wal"}}, c.commitTargets())
	c.LogStores = LogStores()
	targets := c.commitTargets()
	require.Equal(t, []commitTarget{{"hashicorp", "wal"}, {"hashicorp", "badger"}, {"etcd", "wal"}, {"etcd", "badger"}}, targets)
	var systems []string
	for _, tg := range targets {
		systems = append(systems, tg.system())
	}
	require.Equal(t, []string{"hashicorp", "hashicorp/badger", "etcd", "etcd/badger"}, systems)
	c.LogStores = []string{"badger"}
	require.Equal(t, []commitTarget{{"hashicorp", "badger"}, {"etcd", "badger"}}, c.commitTargets())
}
