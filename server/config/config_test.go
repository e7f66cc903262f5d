package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/config"
)

func TestDefaultsAreValid(t *testing.T) {
	c, err := config.Load("", []string{}, nil)
	require.NoError(t, err)
	assert.Equal(t, config.DefaultConfig(), c)
	require.NoError(t, c.Validate())
	assert.Len(t, c.Members(), 1, "a lone node bootstraps itself")
}

func TestLayering(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ticketd.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
id: n2
api_addr: 127.0.0.1:8002
raft_addr: 127.0.0.1:8102
lease:
  min_ms: 200
  max_ms: 5000
limits:
  max_locks: 10
bootstrap:
  - {id: n1, raft_addr: "127.0.0.1:8101", api_addr: "127.0.0.1:8001"}
  - {id: n2, raft_addr: "127.0.0.1:8102", api_addr: "127.0.0.1:8002"}
log:
  level: debug
`), 0o600))
	environ := []string{
		"TICKETD_LEASE_MAX_MS=9000",
		"TICKETD_LIMITS_MAX_LOCKS=20",
		"TICKETD_CONFIG=ignored",
		"OTHER=1",
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--limits-max-locks=30", "--log-format", "console"}))

	c, err := config.Load(path, environ, fs)
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	assert.Equal(t, "n2", c.ID)                      // file
	assert.Equal(t, int64(200), c.Lease.MinMS)       // file
	assert.Equal(t, int64(9000), c.Lease.MaxMS)      // env over file
	assert.Equal(t, 30, c.Limits.MaxLocks)           // flag over env over file
	assert.Equal(t, 1024, c.Limits.MaxWaitersPerKey) // default
	assert.Equal(t, 100_000, c.Limits.MaxSessions)   // default
	assert.Equal(t, "console", c.Log.Format)         // flag
	assert.Equal(t, "debug", c.Log.Level)            // file
	assert.Equal(t, "127.0.0.1:8001", c.Bootstrap[0].APIAddr)
	assert.Len(t, c.Members(), 2)
}

func TestBootstrapFromEnvAndFlag(t *testing.T) {
	env := []string{"TICKETD_BOOTSTRAP=n1=127.0.0.1:7101/127.0.0.1:7001,n2=127.0.0.1:7102/127.0.0.1:7002"}
	c, err := config.Load("", env, nil)
	require.NoError(t, err)
	require.Len(t, c.Bootstrap, 2)
	assert.Equal(t, config.Peer{ID: "n2", RaftAddr: "127.0.0.1:7102", APIAddr: "127.0.0.1:7002"}, c.Bootstrap[1])
	require.NoError(t, c.Validate())

	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--bootstrap", "n1=127.0.0.1:7101/127.0.0.1:7001"}))
	c, err = config.Load("", env, fs)
	require.NoError(t, err)
	assert.Len(t, c.Bootstrap, 1, "the flag replaces the environment's list")
	assert.Equal(t, "n1=127.0.0.1:7101/127.0.0.1:7001", config.FormatPeers(c.Bootstrap))
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		environ []string
	}{
		{name: "missing_file", path: filepath.Join(t.TempDir(), "nope.yaml")},
		{name: "bad_bootstrap", environ: []string{"TICKETD_BOOTSTRAP=n1"}},
		{name: "not_a_number", environ: []string{"TICKETD_LEASE_MAX_MS=ten"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(tc.path, tc.environ, nil)
			require.ErrorIs(t, err, config.ErrInvalid)
		})
	}
}

func TestValidate(t *testing.T) {
	peers := []config.Peer{
		{ID: "n1", RaftAddr: "127.0.0.1:7101", APIAddr: "127.0.0.1:7001"},
		{ID: "n2", RaftAddr: "127.0.0.1:7102", APIAddr: "127.0.0.1:7002"},
	}
	tests := []struct {
		name string
		edit func(c *config.Config)
	}{
		{name: "empty_id", edit: func(c *config.Config) { c.ID = "" }},
		{name: "bad_api_addr", edit: func(c *config.Config) { c.APIAddr = "nowhere" }},
		{name: "bad_raft_addr", edit: func(c *config.Config) { c.RaftAddr = "" }},
		{name: "empty_data_dir", edit: func(c *config.Config) { c.DataDir = "" }},
		{name: "unknown_backend", edit: func(c *config.Config) { c.Backend = "zookeeper" }},
		{name: "unknown_log_store", edit: func(c *config.Config) { c.Raft.LogStore = "bolt" }},
		{name: "bootstrap_and_join", edit: func(c *config.Config) { c.Bootstrap = peers; c.Join = "127.0.0.1:7002" }},
		{name: "bad_join", edit: func(c *config.Config) { c.Join = "x" }},
		{name: "bootstrap_without_self", edit: func(c *config.Config) { c.ID = "n3" }},
		{name: "bootstrap_duplicate", edit: func(c *config.Config) { c.Bootstrap = append(c.Bootstrap, peers[0]) }},
		{name: "bootstrap_self_mismatch", edit: func(c *config.Config) { c.APIAddr = "127.0.0.1:9999" }},
		{name: "bootstrap_incomplete", edit: func(c *config.Config) { c.Bootstrap[1].APIAddr = "" }},
		{name: "lease_min_zero", edit: func(c *config.Config) { c.Lease.MinMS = 0 }},
		{name: "lease_max_below_min", edit: func(c *config.Config) { c.Lease.MaxMS = 50 }},
		{name: "lock_delay_max_negative", edit: func(c *config.Config) { c.Lease.MaxLockDelayMS = -1 }},
		{name: "negative_limit", edit: func(c *config.Config) { c.Limits.MaxLocks = -1 }},
		{name: "negative_max_sessions", edit: func(c *config.Config) { c.Limits.MaxSessions = -1 }},
		{name: "negative_max_sessions_per_principal", edit: func(c *config.Config) { c.Limits.MaxSessionsPerPrincipal = -1 }},
		{name: "negative_heartbeat", edit: func(c *config.Config) { c.Raft.HeartbeatMS = -1 }},
		{name: "election_below_twice_heartbeat", edit: func(c *config.Config) { c.Raft.HeartbeatMS = 100; c.Raft.ElectionTimeoutMS = 150 }},
		{name: "bad_log_level", edit: func(c *config.Config) { c.Log.Level = "loud" }},
		{name: "bad_log_format", edit: func(c *config.Config) { c.Log.Format = "xml" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := config.DefaultConfig()
			c.Bootstrap = append([]config.Peer(nil), peers...)
			require.NoError(t, c.Validate())
			tc.edit(&c)
			require.ErrorIs(t, c.Validate(), config.ErrInvalid)
		})
	}
}

func TestJoinHasNoBootstrapMembers(t *testing.T) {
	c := config.DefaultConfig()
	c.Join = "127.0.0.1:7001"
	require.NoError(t, c.Validate())
	assert.Empty(t, c.Members())
}

func TestNames(t *testing.T) {
	assert.Equal(t, "TICKETD_LEASE_MIN_MS", config.EnvName("lease.min_ms"))
	assert.Equal(t, "lease-min-ms", config.FlagName("lease.min_ms"))
	assert.Contains(t, config.Keys(), "limits.max_waiters_per_key")
	assert.Contains(t, config.Keys(), "limits.max_sessions")
}

// TestMaxSessionsPerPrincipal: limits.max_sessions_per_principal defaults to
// 1000 and is set by its environment variable and, over it, its flag.
func TestMaxSessionsPerPrincipal(t *testing.T) {
	c, err := config.Load("", []string{}, nil)
	require.NoError(t, err)
	assert.Equal(t, 1000, c.Limits.MaxSessionsPerPrincipal)

	env := []string{config.EnvName("limits.max_sessions_per_principal") + "=5"}
	c, err = config.Load("", env, nil)
	require.NoError(t, err)
	assert.Equal(t, 5, c.Limits.MaxSessionsPerPrincipal)

	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--limits-max-sessions-per-principal=7"}))
	c, err = config.Load("", env, fs)
	require.NoError(t, err)
	assert.Equal(t, 7, c.Limits.MaxSessionsPerPrincipal)
	require.NoError(t, c.Validate())
}

// TestLogStore: raft.log_store defaults to empty (the data dir's store,
// else wal: backends.ResolveLogStore) and is set by the file,
// its environment variable and, over them, --raft-log-store.
func TestLogStore(t *testing.T) {
	c, err := config.Load("", []string{}, nil)
	require.NoError(t, err)
	assert.Empty(t, c.Raft.LogStore)
	require.NoError(t, c.Validate())
	assert.Equal(t, "raft-log-store", config.FlagName("raft.log_store"))

	c, err = config.Load("", []string{"TICKETD_RAFT_LOG_STORE=wal"}, nil)
	require.NoError(t, err)
	assert.Equal(t, config.LogStoreWAL, c.Raft.LogStore)
	require.NoError(t, c.Validate())

	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--raft-log-store", "badger"}))
	c, err = config.Load("", []string{"TICKETD_RAFT_LOG_STORE=wal"}, fs)
	require.NoError(t, err)
	assert.Equal(t, config.LogStoreBadger, c.Raft.LogStore, "the flag overrides the environment")

	path := filepath.Join(t.TempDir(), "ticketd.yaml")
	require.NoError(t, os.WriteFile(path, []byte("raft:\n  log_store: wal\n"), 0o600))
	c, err = config.Load(path, []string{}, nil)
	require.NoError(t, err)
	assert.Equal(t, config.LogStoreWAL, c.Raft.LogStore)
}
