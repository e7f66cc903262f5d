package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// TestWriteLock: "lock get" text shows an exclusive lock on one line, as it
// always did, and a shared key or a semaphore with one line per holder.
func TestWriteLock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		lock lockJSON
		want string
	}{
		{name: "free", lock: lockJSON{Key: "k"}, want: "\"k\" is free\n"},
		{name: "exclusive", lock: lockJSON{Key: "k", Held: true, Token: 7, TTLMs: 5000, RemainingMs: 4000, Owner: "o",
			Holders: []holderJSON{{Token: 7, Owner: "o", TTLMs: 5000, RemainingMs: 4000}}},
			want: "\"k\" held: token 7 ttl 5s remaining 4s owner \"o\"\n"},
		{name: "exclusive_under_session", lock: lockJSON{Key: "k", Held: true, Token: 7, TTLMs: 5000, RemainingMs: 4000, Owner: "o",
			Holders: []holderJSON{{Token: 7, Owner: "o", TTLMs: 5000, RemainingMs: 4000, Session: 3}}},
			want: "\"k\" held: token 7 ttl 5s remaining 4s owner \"o\" session 3\n"},
		{name: "shared", lock: lockJSON{Key: "k", Held: true, Mode: "MODE_SHARED",
			Holders: []holderJSON{{Token: 7, Owner: "a", TTLMs: 5000, RemainingMs: 4000}, {Token: 9, Owner: "b", TTLMs: 5000, RemainingMs: -1, Session: 3}}},
			want: "\"k\" held shared by 2\n  token 7 ttl 5s remaining 4s owner \"a\"\n  token 9 ttl 5s remaining unknown (stale read) owner \"b\" session 3\n"},
		{name: "semaphore", lock: lockJSON{Key: "k", Held: true, Limit: 3,
			Holders: []holderJSON{{Token: 7, Owner: "a", TTLMs: 5000, RemainingMs: 4000}}},
			want: "\"k\" held: 1 of 3 slots (semaphore)\n  token 7 ttl 5s remaining 4s owner \"a\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			writeLock(&b, tt.lock)
			assert.Equal(t, tt.want, b.String())
		})
	}
}

// testSharedCommands drives --shared, --limit, --session and the session
// group against a real cluster (called from TestAgainstCluster).
func testSharedCommands(t *testing.T, eps string) {
	var a, b grantJSON
	ctlJSON(t, eps, exitOK, &a, "lock", "acquire", "sh/r", "--shared", "--ttl", "20s")
	ctlJSON(t, eps, exitOK, &b, "lock", "acquire", "sh/r", "--shared", "--ttl", "20s")
	assert.Greater(t, b.Token, a.Token, "each shared holder has its own token")
	ctlJSON(t, eps, exitLocked, nil, "lock", "acquire", "sh/r", "--ttl", "20s")

	code, out, errs := ctl(t, eps, "-o", "json", "lock", "get", "sh/r")
	require.Equal(t, exitOK, code, errs)
	var got ticketv1.GetLockResponse
	require.NoError(t, protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal([]byte(out), &got), "the API's own JSON (plus key): %s", out)
	assert.Equal(t, ticketv1.Mode_MODE_SHARED, got.GetMode())
	require.Len(t, got.GetHolders(), 2)
	assert.Equal(t, []uint64{a.Token, b.Token}, []uint64{got.GetHolders()[0].GetToken(), got.GetHolders()[1].GetToken()})
	assert.Zero(t, got.GetToken(), "the singular fields describe only an exclusive lock")

	code, out, _ = ctl(t, eps, "-o", "value", "lock", "get", "sh/r")
	require.Equal(t, exitOK, code)
	assert.Equal(t, itoa(a.Token)+"\n"+itoa(b.Token)+"\n", out, "-o value: every holder's token")
	code, out, _ = ctl(t, eps, "lock", "list", "--prefix", "sh/")
	require.Equal(t, exitOK, code)
	assert.Equal(t, 2, strings.Count(out, "shared"), "one row per holder: %s", out)
	var chk checkJSON
	ctlJSON(t, eps, exitOK, &chk, "lock", "check", "sh/r", itoa(a.Token))
	assert.True(t, chk.Valid, "an older shared holder is valid too")
	assert.Equal(t, "MODE_SHARED", chk.Mode)

	code, _, errs = ctl(t, eps, "lock", "acquire", "sh/r", "--limit", "2")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "failed_precondition", "another limit on a held key is refused")
	for _, tok := range []uint64{a.Token, b.Token} {
		ctlJSON(t, eps, exitOK, nil, "lock", "release", "sh/r", itoa(tok))
	}

	var s1, s2 grantJSON
	ctlJSON(t, eps, exitOK, &s1, "lock", "acquire", "sh/sem", "--limit", "2", "--ttl", "20s")
	ctlJSON(t, eps, exitOK, &s2, "lock", "acquire", "sh/sem", "--limit", "2", "--ttl", "20s")
	ctlJSON(t, eps, exitLocked, nil, "lock", "acquire", "sh/sem", "--limit", "2", "--ttl", "20s")
	var info lockJSON
	ctlJSON(t, eps, exitOK, &info, "lock", "get", "sh/sem")
	assert.Equal(t, uint32(2), info.Limit)
	assert.Len(t, info.Holders, 2)
	for _, tok := range []uint64{s1.Token, s2.Token} {
		ctlJSON(t, eps, exitOK, nil, "lock", "release", "sh/sem", itoa(tok))
	}

	var sess sessionJSON
	ctlJSON(t, eps, exitOK, &sess, "session", "create", "--ttl", "20s")
	require.NotZero(t, sess.Session)
	assert.Equal(t, int64(20000), sess.TTLMs)
	id := itoa(sess.Session)
	var x, y grantJSON
	ctlJSON(t, eps, exitOK, &x, "lock", "acquire", "sh/s1", "--session", id)
	ctlJSON(t, eps, exitOK, &y, "lock", "acquire", "sh/s2", "--session", id, "--shared")
	assert.Equal(t, sess.Session, x.Session)
	assert.Equal(t, int64(20000), x.TTLMs, "the session's TTL is the lease")
	ctlJSON(t, eps, exitOK, &info, "lock", "get", "sh/s1")
	require.Len(t, info.Holders, 1)
	assert.Equal(t, sess.Session, info.Holders[0].Session)
	var ka sessionJSON
	ctlJSON(t, eps, exitOK, &ka, "session", "keepalive", id)
	assert.Equal(t, int64(20000), ka.TTLMs)
	var closed closedJSON
	ctlJSON(t, eps, exitOK, &closed, "session", "close", id)
	assert.True(t, closed.Closed)
	for _, k := range []string{"sh/s1", "sh/s2"} {
		ctlJSON(t, eps, exitOK, &info, "lock", "get", k)
		assert.False(t, info.Held, "closing the session released %s", k)
	}
	ctlJSON(t, eps, exitNotHeld, nil, "session", "keepalive", id)
	ctlJSON(t, eps, exitNotHeld, nil, "lock", "acquire", "sh/s1", "--session", id)
}
