package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// ctl runs ticketctl in-process against endpoints and returns its exit code,
// stdout and stderr.
func ctl(t *testing.T, endpoints string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := run(ctx, append([]string{"--endpoints", endpoints, "--timeout", "20s"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// ctlJSON runs ticketctl with -o json, requires exit code want, and decodes stdout into v.
func ctlJSON(t *testing.T, endpoints string, want int, v any, args ...string) {
	t.Helper()
	code, out, errs := ctl(t, endpoints, append([]string{"-o", "json"}, args...)...)
	require.Equal(t, want, code, "ticketctl %v: stdout %q stderr %q", args, out, errs)
	if v != nil {
		require.NoError(t, json.Unmarshal([]byte(out), v), "stdout %q", out)
	}
}

// TestUsageErrors: a command line ticketctl cannot run exits 64 (never 0
// with help, never a code that means an answer about a lock) and says what
// was expected.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "bad_token", args: []string{"lock", "renew", "k", "x"}, want: "want a positive integer"},
		{name: "zero_token", args: []string{"lock", "release", "k", "0"}, want: "want a positive integer"},
		{name: "missing_key", args: []string{"lock", "acquire"}, want: "usage: ticketctl lock acquire KEY"},
		{name: "stray_argument", args: []string{"status", "extra"}, want: "usage: ticketctl status"},
		{name: "bad_output", args: []string{"-o", "yaml", "status"}, want: "text, json or value"},
		{name: "unknown_command", args: []string{"frobnicate"}, want: `unknown subcommand "frobnicate"`},
		{name: "unknown_lock_subcommand", args: []string{"lock", "nosuch"}, want: `lock: unknown subcommand "nosuch"; want one of: acquire,`},
		{name: "lock_key_dash_cmd", args: []string{"lock", "jobs/a", "--", "true"}, want: "ticketctl lock run KEY -- CMD"},
		{name: "unknown_members_subcommand", args: []string{"members", "nosuch"}, want: "want one of: add, list, remove"},
		{name: "group_without_subcommand", args: []string{"members"}, want: "want a subcommand"},
		{name: "unknown_flag", args: []string{"status", "--nosuch"}, want: "unknown flag: --nosuch"},
		{name: "run_without_dash", args: []string{"lock", "run", "k", "true"}, want: "usage: ticketctl lock run KEY"},
		{name: "no_endpoints", args: []string{"--endpoints", "", "status"}, want: "--endpoints is empty"},
		{name: "shared_semaphore", args: []string{"lock", "acquire", "k", "--shared", "--limit", "2"}, want: "--shared and --limit exclude each other"},
		{name: "run_shared_semaphore", args: []string{"lock", "run", "k", "--shared", "--limit", "2", "--", "true"}, want: "--shared and --limit exclude each other"},
		{name: "hold_under_session", args: []string{"lock", "acquire", "k", "--hold", "--session", "5"}, want: "--hold and --session exclude each other"},
		{name: "bad_limit", args: []string{"lock", "acquire", "k", "--limit", "-1"}, want: "invalid argument"},
		{name: "bad_session_id", args: []string{"session", "keepalive", "x"}, want: "want a positive integer"},
		{name: "zero_session_id", args: []string{"session", "close", "0"}, want: "want a positive integer"},
		{name: "session_without_subcommand", args: []string{"session"}, want: "want a subcommand"},
		{name: "ttl_with_session", args: []string{"lock", "acquire", "k", "--session", "5", "--ttl", "30s"}, want: "--ttl and --session exclude each other"},
		{name: "observe_with_command", args: []string{"elect", "--observe", "e", "--", "true"}, want: "elect --observe NAME"},
		{name: "session_run_without_dash", args: []string{"session", "run", "true"}, want: "usage: ticketctl session run"},
		{name: "run_without_ttl", args: []string{"lock", "run", "k", "--ttl", "0", "--", "true"}, want: "--ttl must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errs := ctl(t, "127.0.0.1:1", tt.args...)
			assert.Equal(t, exitUsage, code, "stderr %q", errs)
			assert.Contains(t, errs, tt.want)
		})
	}
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		code, _, errs := ctl(t, "127.0.0.1:1", "-o", "json", "lock", "nosuch")
		require.Equal(t, exitUsage, code)
		var e errorJSON
		require.NoError(t, json.Unmarshal([]byte(errs), &e), "stderr %q", errs)
		assert.Equal(t, errorJSON{Code: "usage", Message: e.Message, ExitCode: exitUsage}, e)
		assert.Contains(t, e.Message, "nosuch")
	})
	t.Run("bare_ticketctl_prints_help", func(t *testing.T) {
		t.Parallel()
		var out, errb bytes.Buffer
		assert.Equal(t, exitOK, run(context.Background(), nil, &out, &errb))
		assert.Contains(t, out.String(), "Exit codes:")
	})
}

// TestEnvGlobals: every global flag has its TICKETD_* variable, and a
// malformed one is a usage error. Not parallel: it sets the environment.
func TestEnvGlobals(t *testing.T) {
	t.Setenv("TICKETD_OUTPUT", "json")
	t.Setenv("TICKETD_TIMEOUT", "1m")
	t.Setenv("TICKETD_GRPC", "true")
	t.Setenv("TICKETD_CACERT", "/ca.pem")
	t.Setenv("TICKETD_CLIENT_CERT", "/c.pem")
	t.Setenv("TICKETD_CLIENT_KEY", "/k.pem")
	t.Setenv("TICKETD_KEY_FILE", "/node.key")   // ticketd's own key, not ticketctl's
	t.Setenv("TICKETD_KEY", "not-the-key-file") // lock run's variable for its command
	t.Setenv("TICKETD_TOKEN", "secret")
	t.Setenv("TICKETD_ENDPOINTS", "10.0.0.1:7001")
	var out bytes.Buffer
	root, g := newRootCmd(&out, &out)
	require.NoError(t, root.ParseFlags(nil))
	assert.Equal(t, globals{endpoints: "10.0.0.1:7001", output: outJSON, timeout: time.Minute, grpc: true,
		cacert: "/ca.pem", cert: "/c.pem", key: "/k.pem", token: "secret", stdout: &out, stderr: &out,
		cacertFrom: "TICKETD_CACERT", certFrom: "TICKETD_CLIENT_CERT", keyFrom: "TICKETD_CLIENT_KEY"}, *g)

	// TICKETD_TOKEN is the bearer token everywhere; the former
	// TICKETD_BEARER_TOKEN is not read any more.
	t.Setenv("TICKETD_BEARER_TOKEN", "parent-secret")
	_, g = newRootCmd(&out, &out)
	assert.Equal(t, "secret", g.token)

	t.Setenv("TICKETD_GRPC", "maybe")
	var errb bytes.Buffer
	code := run(context.Background(), []string{"status"}, &out, &errb)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errb.String(), "TICKETD_GRPC")
}

// TestAgainstCluster drives every command against a real three-node cluster.
func TestAgainstCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ticketd cluster")
	}
	cl := ticketdtest.Start(t, ticketdtest.Options{Nodes: 3, Args: []string{"--raft-election-timeout-ms=500", "--raft-heartbeat-ms=50"}})
	var addrs []string
	for i := range cl.Len() {
		addrs = append(addrs, cl.Node(i).APIAddr)
	}
	eps := strings.Join(addrs, ",")

	t.Run("lock_lifecycle", func(t *testing.T) {
		var g grantJSON
		ctlJSON(t, eps, exitOK, &g, "lock", "acquire", "ctl/a", "--ttl", "20s", "--owner", "job-1")
		assert.Equal(t, "ctl/a", g.Key)
		assert.NotZero(t, g.Token)
		assert.Equal(t, int64(20000), g.TTLMs)
		assert.Equal(t, "job-1", g.Owner)

		var again grantJSON
		ctlJSON(t, eps, exitOK, &again, "lock", "acquire", "ctl/a", "--ttl", "20s", "--owner", "job-1")
		assert.Equal(t, g.Token, again.Token, "a retry with the same owner gets the same grant")
		ctlJSON(t, eps, exitLocked, nil, "lock", "acquire", "ctl/a", "--ttl", "20s")

		var info lockJSON
		ctlJSON(t, eps, exitOK, &info, "lock", "get", "ctl/a")
		require.Len(t, info.Holders, 1, "an exclusive lock lists its one holder")
		assert.Equal(t, holderJSON{Token: g.Token, Owner: "job-1", TTLMs: 20000, RemainingMs: info.Holders[0].RemainingMs}, info.Holders[0])
		info.Holders = nil
		assert.Equal(t, lockJSON{Key: "ctl/a", Held: true, Token: g.Token, TTLMs: 20000, RemainingMs: info.RemainingMs, Owner: "job-1"}, info)
		// A stale read is served by whichever node answers from its own
		// applied state, which may not have applied the grant yet: it must
		// see it once that node catches up.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			ctlJSON(t, eps, exitOK, &info, "lock", "get", "ctl/a", "--stale")
			if info.Token == g.Token || time.Now().After(deadline) {
				break
			}
		}
		assert.Equal(t, g.Token, info.Token, "a stale read sees the grant once its node applied it")

		var list listJSON
		ctlJSON(t, eps, exitOK, &list, "lock", "list", "--prefix", "ctl/")
		require.Len(t, list.Locks, 1)
		assert.Equal(t, g.Token, list.Locks[0].Token)
		ctlJSON(t, eps, exitOK, &list, "lock", "list", "--prefix", "none/")
		assert.Empty(t, list.Locks)

		var chk checkJSON
		ctlJSON(t, eps, exitOK, &chk, "lock", "check", "ctl/a", itoa(g.Token))
		assert.True(t, chk.Valid)
		ctlJSON(t, eps, exitNotHeld, &chk, "lock", "check", "ctl/a", itoa(g.Token+100))
		assert.False(t, chk.Valid)
		assert.Equal(t, g.Token, chk.CurrentToken)

		var rn renewJSON
		ctlJSON(t, eps, exitOK, &rn, "lock", "renew", "ctl/a", itoa(g.Token))
		assert.Equal(t, int64(20000), rn.TTLMs)
		ctlJSON(t, eps, exitNotHeld, nil, "lock", "renew", "ctl/a", itoa(g.Token+100))

		ctlJSON(t, eps, exitNotHeld, nil, "lock", "release", "ctl/a", itoa(g.Token+100))
		var rel releaseJSON
		ctlJSON(t, eps, exitOK, &rel, "lock", "release", "ctl/a", itoa(g.Token))
		assert.True(t, rel.Released)
		ctlJSON(t, eps, exitOK, &info, "lock", "get", "ctl/a")
		assert.False(t, info.Held)
	})

	t.Run("acquire_wait", func(t *testing.T) {
		var g grantJSON
		ctlJSON(t, eps, exitOK, &g, "lock", "acquire", "ctl/w", "--ttl", "20s")
		type res struct {
			code int
			out  string
		}
		done := make(chan res, 1)
		go func() {
			code, out, _ := ctl(t, eps, "-o", "json", "lock", "acquire", "ctl/w", "--ttl", "20s", "--wait")
			done <- res{code, out}
		}()
		leader := cl.Leader(t)
		require.Eventually(t, func() bool {
			v, err := cl.Metric(leader, "ticketd_waiters")
			return err == nil && v == 1
		}, 10*time.Second, 10*time.Millisecond,
			"the waiter never queued")
		ctlJSON(t, eps, exitOK, nil, "lock", "release", "ctl/w", itoa(g.Token))
		r := <-done
		require.Equal(t, exitOK, r.code)
		var w grantJSON
		require.NoError(t, json.Unmarshal([]byte(r.out), &w))
		assert.Greater(t, w.Token, g.Token)
		ctlJSON(t, eps, exitOK, nil, "lock", "release", "ctl/w", itoa(w.Token))
	})

	t.Run("text_output", func(t *testing.T) {
		code, out, errs := ctl(t, eps, "lock", "acquire", "ctl/t", "--ttl", "5s", "--grpc")
		require.Equal(t, exitOK, code, errs)
		assert.Contains(t, out, `acquired "ctl/t" token `)
		code, out, _ = ctl(t, eps, "lock", "list")
		require.Equal(t, exitOK, code)
		assert.Contains(t, out, "KEY")
		assert.Contains(t, out, "ctl/t")
		code, out, _ = ctl(t, eps, "status")
		require.Equal(t, exitOK, code)
		assert.Contains(t, out, "leader:")
		assert.Contains(t, out, cl.Node(0).RaftAddr)
	})

	t.Run("status", func(t *testing.T) {
		var st statusJSON
		ctlJSON(t, eps, exitOK, &st, "status")
		assert.Equal(t, cl.Node(cl.Leader(t)).ID, st.LeaderID)
		assert.Equal(t, st.LeaderID, st.NodeID, "status comes from the leader")
		assert.Equal(t, "hashicorp", st.Backend)
		assert.Len(t, st.Members, 3)

		var all nodesJSON
		ctlJSON(t, eps, exitOK, &all, "status", "--all")
		require.Len(t, all.Nodes, 3)
		for i, n := range all.Nodes {
			assert.Equal(t, cl.Node(i).ID, n.NodeID)
			assert.Equal(t, st.LeaderID, n.LeaderID)
		}

		var ms membersResult
		ctlJSON(t, eps, exitOK, &ms, "members", "list")
		assert.Len(t, ms.Members, 3)
	})

	t.Run("transfer_leader", func(t *testing.T) {
		old := cl.Leader(t)
		target := cl.Node((old + 1) % cl.Len()).ID
		var tr transferJSON
		ctlJSON(t, eps, exitOK, &tr, "transfer-leader", target)
		assert.Equal(t, target, tr.LeaderID)
		require.Equal(t, target, cl.Node(cl.Leader(t)).ID)
	})

	t.Run("error_messages", func(t *testing.T) { testErrorMessages(t, eps) })
	t.Run("check_free_key", func(t *testing.T) { testCheckFreeKey(t, eps) })
	t.Run("wait_runs_out", func(t *testing.T) { testWaitRunsOut(t, eps) })
	t.Run("output_value", func(t *testing.T) { testOutputValue(t, eps) })
	t.Run("json_is_the_api_dialect", func(t *testing.T) { testAPIDialect(t, eps) })
	t.Run("endpoint_health", func(t *testing.T) { testEndpointHealth(t, eps) })
	t.Run("shared_semaphore_session", func(t *testing.T) { testSharedCommands(t, eps) })

	t.Run("members_add_refuses_dead_voter", func(t *testing.T) {
		// A voter that never starts would leave the cluster needing three of
		// four votes with one of them gone for good: the leader refuses it
		// (etcd strict reconfig), and membership is unchanged.
		raft, api := ticketdtest.FreeAddr(t), ticketdtest.FreeAddr(t)
		code, out, errs := ctl(t, eps, "members", "add", "n9", raft, api)
		assert.Equal(t, exitError, code, "stdout %q", out)
		assert.Contains(t, errs, "failed_precondition")
		var ms membersResult
		ctlJSON(t, eps, exitOK, &ms, "members", "list")
		assert.Len(t, ms.Members, 3)
	})
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
