package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// What a newcomer meets first — error messages, usage, status and check
// output — checked against a real cluster.

// testErrorMessages: one sentence per error, the code once, no package
// names, the user's terms (--ttl).
func testErrorMessages(t *testing.T, eps string) {
	var g grantJSON
	ctlJSON(t, eps, exitOK, &g, "lock", "acquire", "msg/a", "--ttl", "20s")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"ttl_out_of_range", []string{"lock", "acquire", "msg/b", "--ttl", "50ms"}, exitError,
			"ticketctl: --ttl: invalid_argument: lease 50ms is outside the allowed range 100ms to 10m0s\n"},
		{"held", []string{"lock", "acquire", "msg/a", "--ttl", "20s"}, exitLocked,
			`ticketctl: acquire "msg/a": already_exists: key "msg/a" is held by another owner` + "\n"},
		{"renew_wrong_token", []string{"lock", "renew", "msg/a", itoa(g.Token + 50)}, exitNotHeld,
			`ticketctl: renew "msg/a": not_found: no lock on "msg/a" with token ` + itoa(g.Token+50) + ": lease expired or released\n"},
		{"release_wrong_token", []string{"lock", "release", "msg/a", itoa(g.Token + 50)}, exitNotHeld,
			`ticketctl: release "msg/a": not_found: no lock on "msg/a" with token ` + itoa(g.Token+50) + ": lease expired or released\n"},
	}
	leak := regexp.MustCompile(`ticketd: |waitq|lessor|invalid argument`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := ctl(t, eps, tt.args...)
			assert.Equal(t, tt.code, code, "stdout %q", out)
			assert.Equal(t, tt.want, errs)
			assert.False(t, leak.MatchString(errs), "leaks an internal name or repeats the code: %q", errs)
		})
	}
	t.Run("json", func(t *testing.T) {
		code, out, errs := ctl(t, eps, "-o", "json", "lock", "acquire", "msg/a", "--ttl", "20s")
		require.Equal(t, exitLocked, code)
		assert.Empty(t, out)
		var e errorJSON
		require.NoError(t, json.Unmarshal([]byte(errs), &e), "stderr %q", errs)
		assert.Equal(t, errorJSON{Code: "already_exists", Message: `acquire "msg/a": already_exists: key "msg/a" is held by another owner`,
			ExitCode: exitLocked}, e)
	})
	ctlJSON(t, eps, exitOK, nil, "lock", "release", "msg/a", itoa(g.Token))
}

// testCheckFreeKey: "lock check" on a free key says it is free, not
// "current token 0".
func testCheckFreeKey(t *testing.T, eps string) {
	code, out, errs := ctl(t, eps, "lock", "check", "free/never", "7")
	assert.Equal(t, exitNotHeld, code)
	assert.Empty(t, out)
	assert.Equal(t, "ticketctl: token 7 is not the holder of \"free/never\": the key is free\n", errs)
	assert.NotContains(t, errs, "token 0")
}

// testWaitRunsOut: a --wait acquire whose --timeout runs out on a key that
// stays held exits 8 "still held after 2s", not 4 "outcome unknown".
func testWaitRunsOut(t *testing.T, eps string) {
	var g grantJSON
	ctlJSON(t, eps, exitOK, &g, "lock", "acquire", "wait/held", "--ttl", "30s")
	var out, errb strings.Builder
	code := run(t.Context(), []string{"--endpoints", eps, "--timeout", "2s", "lock", "acquire", "wait/held", "--ttl", "10s", "--wait"}, &out, &errb)
	assert.Equal(t, exitStillHeld, code, "stderr %q", errb.String())
	assert.Equal(t, `ticketctl: "wait/held" still held after 2s (by token `+itoa(g.Token)+"); nothing was acquired\n", errb.String())
	assert.Empty(t, out.String())

	var info lockJSON
	ctlJSON(t, eps, exitOK, &info, "lock", "get", "wait/held")
	assert.Equal(t, g.Token, info.Token, "the holder is unchanged")
	ctlJSON(t, eps, exitOK, nil, "lock", "release", "wait/held", itoa(g.Token))
}

// testOutputValue: -o value prints the bare value a script captures.
func testOutputValue(t *testing.T, eps string) {
	code, tok, errs := ctl(t, eps, "-o", "value", "lock", "acquire", "val/a", "--ttl", "20s")
	require.Equal(t, exitOK, code, errs)
	assert.Regexp(t, `^[1-9][0-9]*\n$`, tok)
	tok = strings.TrimSpace(tok)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"get", []string{"lock", "get", "val/a"}, tok + "\n"},
		{"get_free", []string{"lock", "get", "val/free"}, ""},
		{"check", []string{"lock", "check", "val/a", tok}, tok + "\n"},
		{"renew", []string{"lock", "renew", "val/a", tok}, tok + "\n"},
		{"list", []string{"lock", "list", "--prefix", "val/"}, "val/a\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := ctl(t, eps, append([]string{"-o", "value"}, tt.args...)...)
			require.Equal(t, exitOK, code, errs)
			assert.Equal(t, tt.want, out)
		})
	}
	code, out, _ := ctl(t, eps, "-o", "value", "lock", "release", "val/a", tok)
	assert.Equal(t, exitOK, code)
	assert.Empty(t, out)
}

// testAPIDialect: ticketctl's JSON is the API's JSON: each output decodes
// with protojson into the API message it mirrors, with the same values.
func testAPIDialect(t *testing.T, eps string) {
	var g grantJSON
	code, out, errs := ctl(t, eps, "-o", "json", "lock", "acquire", "dialect/a", "--ttl", "20s", "--owner", "o1")
	require.Equal(t, exitOK, code, errs)
	require.NoError(t, json.Unmarshal([]byte(out), &g))
	assert.Contains(t, out, `"token":"`+itoa(g.Token)+`"`, "64-bit integers are strings, as in protojson")
	assert.Contains(t, out, `"leaseMs":"20000"`)

	strict := protojson.UnmarshalOptions{}
	lenient := protojson.UnmarshalOptions{DiscardUnknown: true}
	tests := []struct {
		name string
		args []string
		opts protojson.UnmarshalOptions
		msg  proto.Message
		want proto.Message
	}{
		{"acquire", []string{"lock", "acquire", "dialect/a", "--ttl", "20s", "--owner", "o1"}, lenient,
			&ticketv1.AcquireResponse{}, &ticketv1.AcquireResponse{Token: g.Token, LeaseMs: 20000}},
		{"get", []string{"lock", "get", "dialect/a"}, lenient,
			&ticketv1.GetLockResponse{}, &ticketv1.GetLockResponse{Held: true, Token: g.Token, LeaseMs: 20000, Owner: "o1",
				Holders: []*ticketv1.Holder{{Token: g.Token, Owner: "o1", LeaseMs: 20000}}}},
		{"check", []string{"lock", "check", "dialect/a", itoa(g.Token)}, lenient,
			&ticketv1.CheckTokenResponse{}, &ticketv1.CheckTokenResponse{Valid: true, CurrentToken: g.Token}},
		{"renew", []string{"lock", "renew", "dialect/a", itoa(g.Token)}, lenient,
			&ticketv1.RenewResponse{}, &ticketv1.RenewResponse{LeaseMs: 20000}},
		{"list", []string{"lock", "list", "--prefix", "dialect/"}, strict,
			&ticketv1.ListLocksResponse{}, &ticketv1.ListLocksResponse{Locks: []*ticketv1.Lock{{Key: "dialect/a", Token: g.Token, LeaseMs: 20000, Owner: "o1",
				Holders: []*ticketv1.Holder{{Token: g.Token, Owner: "o1", LeaseMs: 20000}}}}}},
		{"status", []string{"status"}, strict, &ticketv1.StatusResponse{}, nil},
		{"members", []string{"members", "list"}, strict, &ticketv1.StatusResponse{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := ctl(t, eps, append([]string{"-o", "json"}, tt.args...)...)
			require.Equal(t, exitOK, code, errs)
			require.NoError(t, tt.opts.Unmarshal([]byte(out), tt.msg), "stdout %q", out)
			clearRemaining(tt.msg)
			if tt.want != nil {
				assert.True(t, proto.Equal(tt.want, tt.msg), "got %v, want %v", tt.msg, tt.want)
			}
		})
	}
	ctlJSON(t, eps, exitOK, nil, "lock", "release", "dialect/a", itoa(g.Token))
}

// clearRemaining zeroes the remaining_ms fields, which run down.
func clearRemaining(m proto.Message) {
	switch v := m.(type) {
	case *ticketv1.GetLockResponse:
		v.RemainingMs = 0
		for _, h := range v.GetHolders() {
			h.RemainingMs = 0
		}
	case *ticketv1.ListLocksResponse:
		for _, l := range v.GetLocks() {
			l.RemainingMs = 0
			for _, h := range l.GetHolders() {
				h.RemainingMs = 0
			}
		}
	}
}

// testEndpointHealth: "endpoint health" checks each endpoint's /readyz and
// gRPC health; an unreachable one makes it exit 1.
func testEndpointHealth(t *testing.T, eps string) {
	code, out, errs := ctl(t, eps, "endpoint", "health")
	require.Equal(t, exitOK, code, errs)
	for _, ep := range strings.Split(eps, ",") {
		assert.Contains(t, out, ep+" is healthy: ready, grpc SERVING")
	}

	dead := ticketdtest.FreeAddr(t)
	code, out, errs = ctl(t, eps+","+dead, "-o", "json", "endpoint", "health")
	assert.Equal(t, exitError, code)
	var h endpointsHealthJSON
	require.NoError(t, json.Unmarshal([]byte(out), &h), "stdout %q", out)
	require.Len(t, h.Endpoints, 4)
	for _, r := range h.Endpoints[:3] {
		assert.True(t, r.Health, "%+v", r)
	}
	assert.Equal(t, dead, h.Endpoints[3].Endpoint)
	assert.False(t, h.Endpoints[3].Health)
	assert.Contains(t, errs, "1 of 4 endpoints unhealthy")
}
