package core_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/core/internal/corepb"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// withChecksum returns body followed by its big-endian CRC-32C, as a snapshot ends.
func withChecksum(body []byte) []byte {
	return binary.BigEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, castagnoli))
}

// rawRecord is one length-prefixed record of a hand-built snapshot.
func rawRecord(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	require.NoError(t, err)
	return append(protowire.AppendVarint(nil, uint64(len(b))), b...)
}

// buildSnapshot assembles version, records and a valid checksum.
func buildSnapshot(version byte, records ...[]byte) []byte {
	body := []byte{version}
	for _, r := range records {
		body = append(body, r...)
	}
	return withChecksum(body)
}

// sampleState returns a state machine with locks (one renewed, one with a
// lock-delay and a principal), a released token, members and two lock-delay
// records.
func sampleState(t testing.TB) *core.StateMachine {
	t.Helper()
	sm := core.NewStateMachine()
	applyAll(t, sm,
		core.Grant("b", 1000, "o1"), core.Grant("a", 2000, "o2"), core.Grant("c", 3000, "o3"),
		core.Release("c", 3), core.SetMember("n2", "127.0.0.1:7002"), core.SetMember("n1", "127.0.0.1:7001"),
		core.Renew("a", 2), // 7
		core.Grant("d", 1000, "o4").WithLockDelay(500).WithPrincipal("svc"),        // 8, token 4
		core.Grant("y", 1000, "o5").WithLockDelay(900), core.ExpireSeen("y", 5, 9), // 9, 10
		core.Grant("x", 1000, "o6").WithLockDelay(300), core.Expire("x", 6), // 11, 12
	)
	return sm
}

// TestSnapshotFormat pins the version-2 layout: a hand-assembled snapshot of
// the sample state equals what WriteTo produces.
func TestSnapshotFormat(t *testing.T) {
	t.Parallel()
	want := buildSnapshot(core.SnapshotVersion2,
		rawRecord(t, &corepb.SnapshotHeader{AppliedIndex: 12, LastToken: 6, LockCount: 3, MemberCount: 2, LockDelayCount: 2}),
		rawRecord(t, &corepb.LockRecord{Key: "a", Token: 2, LeaseMs: 2000, Owner: "o2", ModIndex: 7}),
		rawRecord(t, &corepb.LockRecord{Key: "b", Token: 1, LeaseMs: 1000, Owner: "o1", ModIndex: 1}),
		rawRecord(t, &corepb.LockRecord{Key: "d", Token: 4, LeaseMs: 1000, Owner: "o4", ModIndex: 8, LockDelayMs: 500, Principal: "svc"}),
		rawRecord(t, &corepb.MemberRecord{Id: "n1", ApiAddr: "127.0.0.1:7001"}),
		rawRecord(t, &corepb.MemberRecord{Id: "n2", ApiAddr: "127.0.0.1:7002"}),
		rawRecord(t, &corepb.LockDelayRecord{Key: "x", LockDelayMs: 300, Index: 12}),
		rawRecord(t, &corepb.LockDelayRecord{Key: "y", LockDelayMs: 900, Index: 10}),
	)
	require.Equal(t, want, snapshotBytes(t, sampleState(t)))
}

// v1Fixture is a version 1 snapshot written by WriteTo before version 2
// existed (committed; never regenerate it). Its state, applied in order:
// Grant orders/42 (worker-1, 10000 ms), Grant b (o1), Grant läs/鍵 (owner "",
// 2500 ms), Release b, Grant a (o2, 3000 ms), Expire orders/42, Grant
// orders/42 (worker-2, 4000 ms), SetMember n2, SetMember n1, Noop, then Skip
// to index 13.
const v1Fixture = "testdata/snapshot-v1.bin"

// TestRestoreVersion1Fixture checks the upgrade path: a version 1 snapshot
// restores with ModIndex 0, no lock-delay, no principal and no delay records,
// writes back as version 2 (which restores to the same bytes again), and the
// restored state goes on applying new commands.
func TestRestoreVersion1Fixture(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(v1Fixture)
	require.NoError(t, err)
	require.Equal(t, core.SnapshotVersion1, data[0])

	sm := sampleState(t)
	require.NoError(t, sm.Restore(bytes.NewReader(data)))
	require.Equal(t, []core.Lock{
		lock("a", 4, 3000, "o2", 0),
		lock("läs/鍵", 3, 2500, "", 0),
		lock("orders/42", 5, 4000, "worker-2", 0),
	}, locksOf(sm))
	require.Equal(t, uint64(5), sm.LastToken())
	require.Equal(t, uint64(13), sm.AppliedIndex())
	require.Equal(t, map[string]string{"n1": "127.0.0.1:7001", "n2": "127.0.0.1:7002"}, sm.Members())
	require.Empty(t, delaysOf(sm))

	v2 := snapshotBytes(t, sm)
	require.Equal(t, core.SnapshotVersion2, v2[0])
	again := core.NewStateMachine()
	require.NoError(t, again.Restore(bytes.NewReader(v2)))
	require.Equal(t, v2, snapshotBytes(t, again))

	// ModIndex 0: any Expire applies, as it did before seen_index existed;
	// a Renew then protects the lock from an Expire decided before it.
	require.Equal(t, []core.Result{
		{Outcome: core.OutcomeExpired, Existed: true},
		{Outcome: core.OutcomeRenewed, LeaseMS: 4000},
		{Outcome: core.OutcomeExpired},
		granted(6, 1000),
	}, applyAll(t, sm,
		core.ExpireSeen("a", 4, 1),
		core.Renew("orders/42", 5),
		core.ExpireSeen("orders/42", 5, 14),
		core.Grant("a", 1000, "o9"),
	))
}

func TestSnapshotOfEmptyStateRoundTrips(t *testing.T) {
	t.Parallel()
	data := snapshotBytes(t, core.NewStateMachine())
	sm := sampleState(t)
	require.NoError(t, sm.Restore(bytes.NewReader(data)))
	require.Equal(t, data, snapshotBytes(t, sm))
	require.Zero(t, sm.Len())
	require.Zero(t, sm.LastToken())
	require.Zero(t, sm.AppliedIndex())
	require.Empty(t, sm.Members())
}

// TestRestoreRejects checks that Restore refuses every corrupt or
// non-canonical snapshot with an error wrapping ErrDecode and leaves the state
// machine exactly as it was.
func TestRestoreRejects(t *testing.T) {
	t.Parallel()
	good := snapshotBytes(t, sampleState(t))
	body := good[:len(good)-4]
	hdr := func(applied, last, locks, members uint64) []byte {
		return rawRecord(t, &corepb.SnapshotHeader{AppliedIndex: applied, LastToken: last, LockCount: locks, MemberCount: members})
	}
	lockRec := func(key string, token uint64) []byte {
		return rawRecord(t, &corepb.LockRecord{Key: key, Token: token, LeaseMs: 1000, Owner: "o"})
	}
	hdr2 := func(applied, last, locks, delays uint64) []byte {
		return rawRecord(t, &corepb.SnapshotHeader{AppliedIndex: applied, LastToken: last, LockCount: locks, LockDelayCount: delays})
	}
	delay := func(key string, ms int64, index uint64) []byte {
		return rawRecord(t, &corepb.LockDelayRecord{Key: key, LockDelayMs: ms, Index: index})
	}
	v1 := core.SnapshotVersion1
	member := func(id string) []byte {
		return rawRecord(t, &corepb.MemberRecord{Id: id, ApiAddr: "127.0.0.1:7001"})
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x01
	badVersion := bytes.Clone(body)
	badVersion[0] = core.SnapshotVersion + 1
	// A lock record whose fields come in reverse order: valid protobuf, but not
	// the form WriteTo produces.
	reordered := protowire.AppendTag(nil, 2, protowire.VarintType)
	reordered = protowire.AppendVarint(reordered, 1)
	reordered = protowire.AppendTag(reordered, 1, protowire.BytesType)
	reordered = protowire.AppendString(reordered, "a")
	// A record length written in two bytes where one would do.
	overlong := append([]byte{0x80 | byte(len(lockRec("a", 1))-1), 0x00}, lockRec("a", 1)[1:]...)
	withUnknown := append(lockRec("a", 1)[1:], 0x78, 0x01) // field 15, varint 1
	withUnknown = append(protowire.AppendVarint(nil, uint64(len(withUnknown))), withUnknown...)

	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"too_short", []byte{core.SnapshotVersion, 0, 0, 0}},
		{"bad_version", withChecksum(badVersion)},
		{"version_zero", buildSnapshot(0, hdr(1, 0, 0, 0))},
		{"flipped_byte", flipped},
		{"flipped_checksum", append(bytes.Clone(body), good[len(good)-4]^0xff, good[len(good)-3], good[len(good)-2], good[len(good)-1])},
		{"truncated", good[:len(good)-7]},
		{"truncated_rechecksummed", withChecksum(body[:len(body)-3])},
		{"missing_checksum", body},
		{"trailing_bytes", append(bytes.Clone(good), 0)},
		{"trailing_bytes_rechecksummed", withChecksum(append(bytes.Clone(body), 0))},
		{"no_header", buildSnapshot(core.SnapshotVersion2)},
		{"fewer_locks_than_header_says", buildSnapshot(core.SnapshotVersion2, hdr(2, 2, 2, 0), lockRec("a", 1))},
		{"more_locks_than_header_says", buildSnapshot(core.SnapshotVersion2, hdr(2, 2, 1, 0), lockRec("a", 1), lockRec("b", 2))},
		{"keys_out_of_order", buildSnapshot(core.SnapshotVersion2, hdr(2, 2, 2, 0), lockRec("b", 1), lockRec("a", 2))},
		{"duplicate_key", buildSnapshot(core.SnapshotVersion2, hdr(2, 2, 2, 0), lockRec("a", 1), lockRec("a", 2))},
		{"token_zero", buildSnapshot(core.SnapshotVersion2, hdr(2, 2, 1, 0), lockRec("a", 0))},
		{"token_above_last_token", buildSnapshot(core.SnapshotVersion2, hdr(2, 2, 1, 0), lockRec("a", 3))},
		{"members_out_of_order", buildSnapshot(core.SnapshotVersion2, hdr(2, 0, 0, 2), member("n2"), member("n1"))},
		{"duplicate_member", buildSnapshot(core.SnapshotVersion2, hdr(2, 0, 0, 2), member("n1"), member("n1"))},
		{"huge_member_count", buildSnapshot(core.SnapshotVersion2, hdr(2, 0, 0, 1<<62))},
		{"huge_lock_count", buildSnapshot(core.SnapshotVersion2, hdr(2, 1, 1<<62, 0), lockRec("a", 1))},
		{"record_length_past_end", buildSnapshot(core.SnapshotVersion2, hdr(2, 1, 1, 0), []byte{0x7f, 0x0a})},
		{"record_not_protobuf", buildSnapshot(core.SnapshotVersion2, hdr(2, 1, 1, 0), []byte{0x02, 0xff, 0xff})},
		{"record_fields_reordered", buildSnapshot(core.SnapshotVersion2, hdr(2, 1, 1, 0), append([]byte{byte(len(reordered))}, reordered...))},
		{"record_length_overlong", buildSnapshot(core.SnapshotVersion2, hdr(2, 1, 1, 0), overlong)},
		{"record_unknown_field", buildSnapshot(core.SnapshotVersion2, hdr(2, 1, 1, 0), withUnknown)},
		{"lock_mod_index_above_applied", buildSnapshot(core.SnapshotVersion2, hdr(2, 1, 1, 0),
			rawRecord(t, &corepb.LockRecord{Key: "a", Token: 1, ModIndex: 3}))},
		{"fewer_delays_than_header_says", buildSnapshot(core.SnapshotVersion2, hdr2(5, 1, 0, 2), delay("a", 10, 1))},
		{"more_delays_than_header_says", buildSnapshot(core.SnapshotVersion2, hdr2(5, 1, 0, 1), delay("a", 10, 1), delay("b", 10, 2))},
		{"delays_out_of_order", buildSnapshot(core.SnapshotVersion2, hdr2(5, 1, 0, 2), delay("b", 10, 1), delay("a", 10, 2))},
		{"duplicate_delay", buildSnapshot(core.SnapshotVersion2, hdr2(5, 1, 0, 2), delay("a", 10, 1), delay("a", 10, 2))},
		{"delay_of_zero_ms", buildSnapshot(core.SnapshotVersion2, hdr2(5, 1, 0, 1), delay("a", 0, 1))},
		{"delay_of_negative_ms", buildSnapshot(core.SnapshotVersion2, hdr2(5, 1, 0, 1), delay("a", -5, 1))},
		{"delay_at_index_zero", buildSnapshot(core.SnapshotVersion2, hdr2(5, 1, 0, 1), delay("a", 10, 0))},
		{"delay_above_applied", buildSnapshot(core.SnapshotVersion2, hdr2(5, 1, 0, 1), delay("a", 10, 6))},
		{"delay_on_held_key", buildSnapshot(core.SnapshotVersion2, hdr2(5, 1, 1, 1), lockRec("a", 1), delay("a", 10, 2))},
		{"huge_delay_count", buildSnapshot(core.SnapshotVersion2, hdr2(5, 1, 0, 1<<62), delay("a", 10, 1))},
		{"v1_with_delay_count", buildSnapshot(v1, hdr2(5, 1, 0, 1), delay("a", 10, 1))},
		{"v1_lock_with_mod_index", buildSnapshot(v1, hdr(2, 1, 1, 0), rawRecord(t, &corepb.LockRecord{Key: "a", Token: 1, ModIndex: 1}))},
		{"v1_lock_with_lock_delay", buildSnapshot(v1, hdr(2, 1, 1, 0), rawRecord(t, &corepb.LockRecord{Key: "a", Token: 1, LockDelayMs: 5}))},
		{"v1_lock_with_principal", buildSnapshot(v1, hdr(2, 1, 1, 0), rawRecord(t, &corepb.LockRecord{Key: "a", Token: 1, Principal: "p"}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sm := sampleState(t)
			before := snapshotBytes(t, sm)
			err := sm.Restore(bytes.NewReader(tt.data))
			assert.ErrorIs(t, err, core.ErrDecode)
			assert.Equal(t, before, snapshotBytes(t, sm), "state changed by a failed Restore")
			_, err = core.CheckSnapshot(tt.data)
			assert.ErrorIs(t, err, core.ErrDecode, "CheckSnapshot accepts what Restore refuses")
			_, err = core.RebaseSnapshot(tt.data, 100)
			assert.ErrorIs(t, err, core.ErrDecode, "RebaseSnapshot accepts what Restore refuses")
		})
	}
}

// TestRestoreReaderError checks that a failing reader is reported as such
// (not as corruption) and changes nothing.
func TestRestoreReaderError(t *testing.T) {
	t.Parallel()
	sm := sampleState(t)
	before := snapshotBytes(t, sm)
	errRead := errors.New("disk gone")
	err := sm.Restore(io.MultiReader(bytes.NewReader(before[:10]), iotest.ErrReader(errRead)))
	require.ErrorIs(t, err, errRead)
	require.NotErrorIs(t, err, core.ErrDecode)
	require.Equal(t, before, snapshotBytes(t, sm))
}

// FuzzRestore checks that Restore never panics, that it rejects with ErrDecode
// and no change of state, that CheckSnapshot accepts and refuses the same
// inputs (and describes the accepted ones as Restore does), that
// RebaseSnapshot of an accepted input is what Restore, Skip and WriteTo
// give, and that whatever it accepts is written back byte
// for byte (a version 1 snapshot: as a version 2 one that restores to the
// same bytes again; versions 2 and 3 as themselves). Each input is tried as given and, so that the fuzzer gets past
// the checksum, as a body with its CRC-32C appended. The seed corpus (valid
// snapshots, with and without checksum) runs with the normal tests. Fuzz with
// the command below (a bounded -fuzzminimizetime keeps input minimization from
// stalling the run on a busy machine):
//
//	go test -run='^$' -fuzz=FuzzRestore -fuzztime=20s -fuzzminimizetime=200x ./core/
func FuzzRestore(f *testing.F) {
	seeds := []*core.StateMachine{core.NewStateMachine(), sampleState(f), sessionState(f)}
	big := core.NewStateMachine()
	for i := range 40 {
		applyAll(f, big, core.Grant(string(rune('a'+i%26))+string(rune('0'+i/26)), int64(i+1), "o"))
	}
	seeds = append(seeds, big)
	for _, sm := range seeds {
		data := snapshotBytes(f, sm)
		f.Add(data)
		f.Add(data[:len(data)-4])
	}
	v1, err := os.ReadFile(v1Fixture)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v1)
	f.Add(v1[:len(v1)-4])
	v2, err := os.ReadFile(v2Fixture)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v2)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, withChecksum(data)} {
			sm := sampleState(t)
			before := snapshotBytes(t, sm)
			sum, checkErr := core.CheckSnapshot(in)
			if err := sm.Restore(bytes.NewReader(in)); err != nil {
				if checkErr == nil {
					t.Fatalf("CheckSnapshot accepted %x, Restore refused it: %v", in, err)
				}
				if !errors.Is(err, core.ErrDecode) {
					t.Fatalf("Restore error does not wrap ErrDecode: %v", err)
				}
				if !bytes.Equal(before, snapshotBytes(t, sm)) {
					t.Fatalf("a failed Restore changed the state")
				}
				continue
			}
			if checkErr != nil {
				t.Fatalf("Restore accepted %x, CheckSnapshot refused it: %v", in, checkErr)
			}
			if want := (core.SnapshotSummary{AppliedIndex: sm.AppliedIndex(), LastToken: sm.LastToken(), Keys: sm.Len()}); sum != want {
				t.Fatalf("CheckSnapshot says %+v, Restore gives %+v", sum, want)
			}
			rebased, err := core.RebaseSnapshot(in, sm.AppliedIndex()+7)
			if err != nil {
				t.Fatalf("RebaseSnapshot refused %x, which Restore accepted: %v", in, err)
			}
			moved := core.NewStateMachine()
			if err := moved.Restore(bytes.NewReader(in)); err != nil {
				t.Fatal(err)
			}
			moved.Skip(sm.AppliedIndex() + 7)
			if want := snapshotBytes(t, moved); !bytes.Equal(rebased, want) {
				t.Fatalf("RebaseSnapshot(%x) = %x; Restore, Skip and WriteTo give %x", in, rebased, want)
			}
			out := snapshotBytes(t, sm)
			if in[0] == core.SnapshotVersion1 {
				// An upgrade: the version 2 form must be a fixed point.
				again := core.NewStateMachine()
				if err := again.Restore(bytes.NewReader(out)); err != nil {
					t.Fatalf("Restore accepted version 1 %x but not its version 2 form %x: %v", in, out, err)
				}
				in = out
				out = snapshotBytes(t, again)
			}
			if !bytes.Equal(out, in) {
				t.Fatalf("Restore accepted %x but writes it back as %x", in, out)
			}
		}
	})
}

// TestRestoresCountsRestores: Restores moves with every Restore that
// replaced the table, never with Apply, Skip or a Restore that failed.
func TestRestoresCountsRestores(t *testing.T) {
	sm := core.NewStateMachine()
	_, err := sm.Apply(1, core.Grant("a", 1000, "o"))
	require.NoError(t, err)
	sm.Skip(5)
	assert.Zero(t, sm.Restores())
	var buf bytes.Buffer
	require.NoError(t, sm.WriteSnapshot(&buf))
	data := buf.Bytes()
	require.NoError(t, sm.Restore(bytes.NewReader(data)))
	assert.Equal(t, uint64(1), sm.Restores())
	require.Error(t, sm.Restore(bytes.NewReader(data[:len(data)-1])))
	assert.Equal(t, uint64(1), sm.Restores(), "a refused snapshot changes nothing")
	_, err = sm.Apply(6, core.Release("a", 1))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), sm.Restores())
}
