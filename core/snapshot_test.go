package core_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
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

// sampleState returns a state machine with locks, a released token and members.
func sampleState(t testing.TB) *core.StateMachine {
	t.Helper()
	sm := core.NewStateMachine()
	applyAll(t, sm,
		core.Grant("b", 1000, "o1"), core.Grant("a", 2000, "o2"), core.Grant("c", 3000, "o3"),
		core.Release("c", 3), core.SetMember("n2", "127.0.0.1:7002"), core.SetMember("n1", "127.0.0.1:7001"),
	)
	return sm
}

// TestSnapshotFormat pins the version-1 layout: a hand-assembled snapshot of
// the sample state equals what WriteTo produces.
func TestSnapshotFormat(t *testing.T) {
	t.Parallel()
	want := buildSnapshot(core.SnapshotVersion,
		rawRecord(t, &corepb.SnapshotHeader{AppliedIndex: 6, LastToken: 3, LockCount: 2, MemberCount: 2}),
		rawRecord(t, &corepb.LockRecord{Key: "a", Token: 2, LeaseMs: 2000, Owner: "o2"}),
		rawRecord(t, &corepb.LockRecord{Key: "b", Token: 1, LeaseMs: 1000, Owner: "o1"}),
		rawRecord(t, &corepb.MemberRecord{Id: "n1", ApiAddr: "127.0.0.1:7001"}),
		rawRecord(t, &corepb.MemberRecord{Id: "n2", ApiAddr: "127.0.0.1:7002"}),
	)
	require.Equal(t, want, snapshotBytes(t, sampleState(t)))
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
	withUnknown := append(lockRec("a", 1)[1:], 0x48, 0x01) // field 9, varint 1
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
		{"no_header", buildSnapshot(core.SnapshotVersion)},
		{"fewer_locks_than_header_says", buildSnapshot(core.SnapshotVersion, hdr(2, 2, 2, 0), lockRec("a", 1))},
		{"more_locks_than_header_says", buildSnapshot(core.SnapshotVersion, hdr(2, 2, 1, 0), lockRec("a", 1), lockRec("b", 2))},
		{"keys_out_of_order", buildSnapshot(core.SnapshotVersion, hdr(2, 2, 2, 0), lockRec("b", 1), lockRec("a", 2))},
		{"duplicate_key", buildSnapshot(core.SnapshotVersion, hdr(2, 2, 2, 0), lockRec("a", 1), lockRec("a", 2))},
		{"token_zero", buildSnapshot(core.SnapshotVersion, hdr(2, 2, 1, 0), lockRec("a", 0))},
		{"token_above_last_token", buildSnapshot(core.SnapshotVersion, hdr(2, 2, 1, 0), lockRec("a", 3))},
		{"members_out_of_order", buildSnapshot(core.SnapshotVersion, hdr(2, 0, 0, 2), member("n2"), member("n1"))},
		{"duplicate_member", buildSnapshot(core.SnapshotVersion, hdr(2, 0, 0, 2), member("n1"), member("n1"))},
		{"huge_member_count", buildSnapshot(core.SnapshotVersion, hdr(2, 0, 0, 1<<62))},
		{"huge_lock_count", buildSnapshot(core.SnapshotVersion, hdr(2, 1, 1<<62, 0), lockRec("a", 1))},
		{"record_length_past_end", buildSnapshot(core.SnapshotVersion, hdr(2, 1, 1, 0), []byte{0x7f, 0x0a})},
		{"record_not_protobuf", buildSnapshot(core.SnapshotVersion, hdr(2, 1, 1, 0), []byte{0x02, 0xff, 0xff})},
		{"record_fields_reordered", buildSnapshot(core.SnapshotVersion, hdr(2, 1, 1, 0), append([]byte{byte(len(reordered))}, reordered...))},
		{"record_length_overlong", buildSnapshot(core.SnapshotVersion, hdr(2, 1, 1, 0), overlong)},
		{"record_unknown_field", buildSnapshot(core.SnapshotVersion, hdr(2, 1, 1, 0), withUnknown)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sm := sampleState(t)
			before := snapshotBytes(t, sm)
			err := sm.Restore(bytes.NewReader(tt.data))
			assert.ErrorIs(t, err, core.ErrDecode)
			assert.Equal(t, before, snapshotBytes(t, sm), "state changed by a failed Restore")
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
// and no change of state, and that whatever it accepts is written back byte
// for byte. Each input is tried as given and, so that the fuzzer gets past
// the checksum, as a body with its CRC-32C appended. The seed corpus (valid
// snapshots, with and without checksum) runs with the normal tests. Fuzz with
// the command below (a bounded -fuzzminimizetime keeps input minimization from
// stalling the run on a busy machine):
//
//	go test -run='^$' -fuzz=FuzzRestore -fuzztime=20s -fuzzminimizetime=200x ./core/
func FuzzRestore(f *testing.F) {
	seeds := []*core.StateMachine{core.NewStateMachine(), sampleState(f)}
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
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, withChecksum(data)} {
			sm := sampleState(t)
			before := snapshotBytes(t, sm)
			if err := sm.Restore(bytes.NewReader(in)); err != nil {
				if !errors.Is(err, core.ErrDecode) {
					t.Fatalf("Restore error does not wrap ErrDecode: %v", err)
				}
				if !bytes.Equal(before, snapshotBytes(t, sm)) {
					t.Fatalf("a failed Restore changed the state")
				}
				continue
			}
			if out := snapshotBytes(t, sm); !bytes.Equal(out, in) {
				t.Fatalf("Restore accepted %x but writes it back as %x", in, out)
			}
		}
	})
}
