package core_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/core/internal/corepb"
)

// codecSamples holds a command of every Op, with empty, long and non-ASCII fields.
var codecSamples = []struct {
	name string
	cmd  core.Command
}{
	{"noop", core.Noop()},
	{"grant", core.Grant("orders/42", 10_000, "worker-1")},
	{"grant_unicode_key_empty_owner", core.Grant("läs/ключ/鍵", 1, "")},
	{"grant_longest_fields", core.Grant(strings.Repeat("k", core.MaxKeyBytes), 1<<40, strings.Repeat("o", core.MaxOwnerBytes))},
	{"release", core.Release("orders/42", 7)},
	{"release_max_token", core.Release("a", ^uint64(0))},
	{"expire", core.Expire("orders/42", 1)},
	{"expire_zero_token", core.Expire("a", 0)},
	{"set_member", core.SetMember("n1", "127.0.0.1:7001")},
	{"set_member_empty_addr", core.SetMember("n1", "")},
	{"renew", core.Renew("orders/42", 7)},
	{"expire_seen", core.ExpireSeen("orders/42", 7, 1<<40)},
	{"grant_lock_delay", core.Grant("orders/42", 10_000, "worker-1").WithLockDelay(15_000)},
	{"grant_principal", core.Grant("orders/42", 10_000, "worker-1").WithPrincipal("orders-svc")},
	{"grant_lock_delay_and_principal", core.Grant("a", 1, "o").WithLockDelay(1).WithPrincipal("CN=ü")},
	{"grant_shared", core.Grant("a", 1000, "o").WithMode(core.ModeShared)},
	{"grant_semaphore", core.Grant("a", 1000, "o").WithLimit(1 << 31)},
	{"grant_under_session", core.Grant("a", 1000, "o").WithSession(1 << 50).WithPrincipal("p").WithLockDelay(5)},
	{"create_session", core.CreateSession(30_000)},
	{"create_session_principal", core.CreateSession(1).WithPrincipal("svc")},
	{"keep_alive_session", core.KeepAliveSession(12)},
	{"close_session", core.CloseSession(12)},
	{"expire_session", core.ExpireSession(12, 40)},
	{"expire_session_unconditional", core.ExpireSession(12, 0)},
	{"renew_batch", core.RenewBatch([]uint64{12, 3, 12}, []core.LockRef{{Key: "orders/42", Token: 7}, {Key: "läs", Token: 1 << 60}})},
	{"renew_batch_sessions_only", core.RenewBatch([]uint64{1}, nil)},
	{"renew_batch_locks_only", core.RenewBatch(nil, []core.LockRef{{Key: "a", Token: 1}})},
}

// TestEncodeVersion checks that Encode writes CommandVersion for every
// command that uses only version 1 fields (the same bytes older nodes wrote)
// and CommandVersion2 for the rest, so that an older node stops on them.
func TestEncodeVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cmd  core.Command
		want byte
	}{
		{"noop", core.Noop(), core.CommandVersion},
		{"grant", core.Grant("a", 1000, "o1"), core.CommandVersion},
		{"release", core.Release("a", 1), core.CommandVersion},
		{"expire", core.Expire("a", 1), core.CommandVersion},
		{"expire_seen_zero", core.ExpireSeen("a", 1, 0), core.CommandVersion},
		{"set_member", core.SetMember("n1", "x"), core.CommandVersion},
		{"renew", core.Renew("a", 1), core.CommandVersion2},
		{"expire_seen", core.ExpireSeen("a", 1, 3), core.CommandVersion2},
		{"grant_lock_delay", core.Grant("a", 1000, "o1").WithLockDelay(10), core.CommandVersion2},
		{"grant_principal", core.Grant("a", 1000, "o1").WithPrincipal("p"), core.CommandVersion2},
		{"grant_exclusive_limit_0", core.Grant("a", 1000, "o1").WithMode(core.ModeExclusive).WithLimit(0), core.CommandVersion},
		{"grant_shared", core.Grant("a", 1000, "o1").WithMode(core.ModeShared), core.CommandVersion3},
		{"grant_semaphore", core.Grant("a", 1000, "o1").WithLimit(2), core.CommandVersion3},
		{"grant_session", core.Grant("a", 1000, "o1").WithSession(3), core.CommandVersion3},
		{"create_session", core.CreateSession(1000), core.CommandVersion3},
		{"keep_alive_session", core.KeepAliveSession(3), core.CommandVersion3},
		{"close_session", core.CloseSession(3), core.CommandVersion3},
		{"expire_session", core.ExpireSession(3, 0), core.CommandVersion3},
		{"renew_batch", core.RenewBatch([]uint64{3}, []core.LockRef{{Key: "a", Token: 1}}), core.CommandVersion4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data, err := core.Encode(tt.cmd)
			require.NoError(t, err)
			assert.Equal(t, tt.want, data[0])
		})
	}
}

// TestDecodeVersion1IgnoresLaterFields checks that a version 1 envelope
// decodes exactly as version 1 nodes read it, even if it carries fields added
// in version 2 (they ignored them as unknown).
func TestDecodeVersion1IgnoresLaterFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		m    *corepb.Command
		want core.Command
	}{
		{"grant", &corepb.Command{Op: &corepb.Command_Grant{Grant: &corepb.Grant{Key: "a", LeaseMs: 5, Owner: "o", LockDelayMs: 9, Principal: "p"}}},
			core.Grant("a", 5, "o")},
		{"expire", &corepb.Command{Op: &corepb.Command_Expire{Expire: &corepb.Expire{Key: "a", Token: 2, SeenIndex: 7}}},
			core.Expire("a", 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := core.Decode(marshalEntry(t, core.CommandVersion, tt.m))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			got, err = core.Decode(marshalEntry(t, core.CommandVersion2, tt.m))
			require.NoError(t, err)
			assert.NotEqual(t, tt.want, got, "version 2 reads the fields")
		})
	}
}

// TestDecodeOlderVersionsIgnoreVersion3Fields checks that version 1 and 2
// envelopes decode as nodes of their time read them, even if they carry a
// Grant's version 3 fields, and that version 3 reads them.
func TestDecodeOlderVersionsIgnoreVersion3Fields(t *testing.T) {
	t.Parallel()
	m := &corepb.Command{Op: &corepb.Command_Grant{Grant: &corepb.Grant{Key: "a", LeaseMs: 5, Owner: "o", Mode: 1, Session: 4}}}
	for _, v := range []byte{core.CommandVersion, core.CommandVersion2} {
		got, err := core.Decode(marshalEntry(t, v, m))
		require.NoError(t, err)
		assert.Equal(t, core.Grant("a", 5, "o"), got, "version %d", v)
	}
	got, err := core.Decode(marshalEntry(t, core.CommandVersion3, m))
	require.NoError(t, err)
	assert.Equal(t, core.Grant("a", 5, "o").WithMode(core.ModeShared).WithSession(4), got)
}

func TestCodecRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tt := range codecSamples {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data, err := core.Encode(tt.cmd)
			if !assert.NoError(t, err) {
				return
			}
			assert.Contains(t, []byte{core.CommandVersion, core.CommandVersion2, core.CommandVersion3, core.CommandVersion4}, data[0], "version byte")
			got, err := core.Decode(data)
			assert.NoError(t, err)
			assert.Equal(t, tt.cmd, got)
		})
	}
}

// TestEncodeDropsFieldsOfOtherOps checks that only the fields of a command's
// Op are encoded: a Release never carries a lease or owner across the wire.
func TestEncodeDropsFieldsOfOtherOps(t *testing.T) {
	t.Parallel()
	data, err := core.Encode(core.Command{Op: core.OpRelease, Key: "a", Token: 3, LeaseMS: 5, Owner: "o", MemberID: "n"})
	require.NoError(t, err)
	got, err := core.Decode(data)
	require.NoError(t, err)
	require.Equal(t, core.Release("a", 3), got)
}

// TestEncodeIsDeterministic checks that equal commands encode to equal bytes,
// so that identical proposals produce identical log entries.
func TestEncodeIsDeterministic(t *testing.T) {
	t.Parallel()
	for _, tt := range codecSamples {
		a, err := core.Encode(tt.cmd)
		require.NoError(t, err)
		b, err := core.Encode(tt.cmd)
		require.NoError(t, err)
		require.Equal(t, a, b, tt.name)
	}
}

func TestEncodeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cmd  core.Command
	}{
		{"unknown_op", core.Command{Op: core.Op(200), Key: "a"}},
		{"invalid_utf8_key", core.Grant("a\xff", 1000, "o1")},
		{"invalid_utf8_owner", core.Grant("a", 1000, "o\xfe")},
		{"invalid_utf8_member", core.SetMember("n\xff", "127.0.0.1:7001")},
		{"unknown_mode", core.Grant("a", 1000, "o1").WithMode(core.Mode(2))},
		{"shared_with_limit", core.Grant("a", 1000, "o1").WithMode(core.ModeShared).WithLimit(2)},
		{"invalid_utf8_session_principal", core.CreateSession(1000).WithPrincipal("p\xff")},
		{"empty_renew_batch", core.RenewBatch(nil, nil)},
		{"renew_batch_without_renewals", core.Command{Op: core.OpRenewBatch}},
		{"invalid_utf8_renew_batch_key", core.RenewBatch(nil, []core.LockRef{{Key: "a\xff", Token: 1}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := core.Encode(tt.cmd)
			assert.ErrorIs(t, err, core.ErrInvalidArgument)
		})
	}
}

// marshalEntry returns the version byte followed by the protobuf encoding of m.
func marshalEntry(t *testing.T, version byte, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return append([]byte{version}, b...)
}

// TestDecodeErrors checks that every kind of bad entry is an error wrapping
// ErrDecode: the node must stop, never skip it (docs/design.md#replicated-commands).
func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	grant := &corepb.Command{Op: &corepb.Command_Grant{Grant: &corepb.Grant{Key: "a", LeaseMs: 1000}}}
	raw, err := proto.Marshal(grant)
	require.NoError(t, err)
	tests := []struct {
		name string
		data []byte
	}{
		{"nil_entry", nil},
		{"empty_entry", []byte{}},
		{"version_zero", marshalEntry(t, 0, grant)},
		{"unknown_version", marshalEntry(t, core.MaxCommandVersion+1, grant)},
		{"renew_batch_in_version_3", marshalEntry(t, core.CommandVersion3,
			&corepb.Command{Op: &corepb.Command_RenewBatch{RenewBatch: &corepb.RenewBatch{Sessions: []uint64{1}}}})},
		{"empty_renew_batch", marshalEntry(t, core.CommandVersion4,
			&corepb.Command{Op: &corepb.Command_RenewBatch{RenewBatch: &corepb.RenewBatch{}}})},
		{"renew_in_version_1", marshalEntry(t, core.CommandVersion,
			&corepb.Command{Op: &corepb.Command_Renew{Renew: &corepb.Renew{Key: "a", Token: 1}}})},
		{"version_only", []byte{core.CommandVersion}},
		{"no_op_set", marshalEntry(t, core.CommandVersion, &corepb.Command{})},
		{"only_unknown_fields", []byte{core.CommandVersion, 0x30, 0x01}}, // field 6, varint 1
		{"truncated", marshalEntry(t, core.CommandVersion, grant)[:5]},
		{"garbage", []byte{core.CommandVersion, 0xff, 0xff, 0xff}},
		{"invalid_utf8_key", []byte{core.CommandVersion, 0x0a, 0x03, 0x0a, 0x01, 0xff}},
		{"raw_protobuf_without_version", raw},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := core.Decode(tt.data)
			assert.ErrorIs(t, err, core.ErrDecode)

			sm := core.NewStateMachine()
			_, _, err = sm.ApplyEntry(1, tt.data)
			assert.ErrorIs(t, err, core.ErrDecode, "ApplyEntry")
			assert.Zero(t, sm.AppliedIndex(), "ApplyEntry must not count a bad entry as applied")
		})
	}
}

// TestDecodeIgnoresUnknownFields pins protobuf's forward compatibility inside
// one envelope version: a field added later is skipped by an older decoder.
func TestDecodeIgnoresUnknownFields(t *testing.T) {
	t.Parallel()
	data, err := core.Encode(core.Release("a", 3))
	require.NoError(t, err)
	data = append(data, 0x30, 0x01) // field 6, varint 1
	got, err := core.Decode(data)
	require.NoError(t, err)
	require.Equal(t, core.Release("a", 3), got)
}

func TestOpAndOutcomeStrings(t *testing.T) {
	t.Parallel()
	ops := map[core.Op]string{
		core.OpNoop: "noop", core.OpGrant: "grant", core.OpRelease: "release",
		core.OpExpire: "expire", core.OpSetMember: "set-member", core.OpRenew: "renew", core.Op(99): "op(99)",
		core.OpCreateSession: "create-session", core.OpKeepAliveSession: "keep-alive-session",
		core.OpCloseSession: "close-session", core.OpExpireSession: "expire-session",
		core.OpRenewBatch: "renew-batch",
	}
	for op, want := range ops {
		assert.Equal(t, want, op.String())
	}
	outcomes := map[core.Outcome]string{
		core.OutcomeNoop: "noop", core.OutcomeGranted: "granted", core.OutcomeGrantRejected: "grant-rejected",
		core.OutcomeReleased: "released", core.OutcomeNotFound: "not-found", core.OutcomeExpired: "expired",
		core.OutcomeRenewed: "renewed", core.OutcomeLimitMismatch: "limit-mismatch",
		core.OutcomeSessionCreated: "session-created", core.OutcomeSessionNotFound: "session-not-found",
		core.Outcome(99): "outcome(99)",
	}
	for o, want := range outcomes {
		assert.Equal(t, want, o.String())
	}
	for m, want := range map[core.Mode]string{core.ModeExclusive: "exclusive", core.ModeShared: "shared", core.Mode(7): "mode(7)"} {
		assert.Equal(t, want, m.String())
	}
}

// FuzzDecode checks that Decode never panics, that its errors wrap ErrDecode,
// and that whatever it accepts re-encodes and decodes to the same Command.
// The seed corpus (valid encodings of every op plus bad entries) runs with
// the normal tests. Fuzz with the command below (a bounded -fuzzminimizetime
// keeps input minimization from stalling the run on a busy machine):
//
//	go test -run='^$' -fuzz=FuzzDecode -fuzztime=20s -fuzzminimizetime=200x ./core/
func FuzzDecode(f *testing.F) {
	for _, tt := range codecSamples {
		data, err := core.Encode(tt.cmd)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{})
	f.Add([]byte{core.CommandVersion})
	f.Add([]byte{core.CommandVersion4 + 1, 0x22, 0x00})
	f.Add([]byte{core.CommandVersion2, 0x3a, 0x03, 0x08, 0x88, 0x27})            // create_session in version 2
	f.Add([]byte{core.CommandVersion, 0x32, 0x05, 0x0a, 0x01, 0x61, 0x10, 0x01}) // renew in version 1
	f.Add([]byte{core.CommandVersion, 0x30, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := core.Decode(data)
		if err != nil {
			if !errors.Is(err, core.ErrDecode) {
				t.Fatalf("Decode(%x) error does not wrap ErrDecode: %v", data, err)
			}
			return
		}
		again, err := core.Encode(cmd)
		if err != nil {
			t.Fatalf("Decode(%x) = %+v, which does not encode: %v", data, cmd, err)
		}
		cmd2, err := core.Decode(again)
		if err != nil || !reflect.DeepEqual(cmd2, cmd) {
			t.Fatalf("Decode(%x) = %+v; re-encoded it decodes to %+v, %v", data, cmd, cmd2, err)
		}
		if _, _, err := core.NewStateMachine().ApplyEntry(1, data); err != nil {
			t.Fatalf("ApplyEntry of a decodable entry: %v", err)
		}
	})
}
