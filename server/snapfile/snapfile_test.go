package snapfile_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/snapfile"
)

// snapshotBytes returns core snapshot bytes of a table with two grants.
func snapshotBytes(t *testing.T) []byte {
	t.Helper()
	sm := core.NewStateMachine()
	_, err := sm.Apply(1, core.Grant("a", 1000, "o1"))
	require.NoError(t, err)
	_, err = sm.Apply(2, core.Grant("b", 1000, "o2"))
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, sm.WriteSnapshot(&b))
	return b.Bytes()
}

func file(t *testing.T, h *ticketv1.SnapshotHeader, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, snapfile.WriteHeader(&b, h))
	b.Write(data)
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	data := snapshotBytes(t)
	h, err := snapfile.NewHeader(data)
	require.NoError(t, err)
	require.Equal(t, uint64(2), h.GetIndex())
	require.Equal(t, uint64(2), h.GetLastToken())
	require.Equal(t, int64(2), h.GetLocksHeld())
	h.Backend = "etcd"
	got, gotData, err := snapfile.Read(bytes.NewReader(file(t, h, data)), 0)
	require.NoError(t, err)
	require.Equal(t, "etcd", got.GetBackend())
	require.Equal(t, data, gotData)
}

func TestReadRefuses(t *testing.T) {
	data := snapshotBytes(t)
	h, err := snapfile.NewHeader(data)
	require.NoError(t, err)
	good := file(t, h, data)
	flipped := bytes.Clone(good)
	flipped[len(flipped)-10] ^= 0xff
	lied := proto(h)
	lied.LastToken = 99
	future := proto(h)
	future.FormatVersion = 2
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"damaged_data", flipped, snapfile.ErrChecksum},
		{"cut_short", good[:len(good)-5], snapfile.ErrChecksum},
		{"not_a_snapshot", []byte("hello, this is not a snapshot file"), snapfile.ErrNotSnapshot},
		{"empty", nil, snapfile.ErrNotSnapshot},
		{"header_lies", file(t, lied, data), snapfile.ErrChecksum},
		{"future_format", file(t, future, data), snapfile.ErrUnsupported},
		{"header_cut", good[:12], io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := snapfile.Read(bytes.NewReader(tc.in), 0)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Read: %v, want %v", err, tc.want)
			}
		})
	}
}

// proto returns a copy of h.
func proto(h *ticketv1.SnapshotHeader) *ticketv1.SnapshotHeader {
	return &ticketv1.SnapshotHeader{
		FormatVersion: h.GetFormatVersion(), Index: h.GetIndex(), LastToken: h.GetLastToken(),
		LocksHeld: h.GetLocksHeld(), Sha256: h.GetSha256(), SizeBytes: h.GetSizeBytes(),
	}
}

// TestHeaderOfMatchesNewHeader: the header computed from a live snapshot
// without holding its bytes is the one NewHeader reads from those bytes,
// and the bytes written afterwards verify against it.
func TestHeaderOfMatchesNewHeader(t *testing.T) {
	sm := core.NewStateMachine()
	for i := range 1000 {
		_, err := sm.Apply(uint64(i+1), core.Grant(string(rune('a'+i%26))+string(rune('a'+i/26)), 5000, "o"))
		require.NoError(t, err)
	}
	snap := sm.Snapshot()
	h, err := snapfile.HeaderOf(snap)
	require.NoError(t, err)
	_, err = sm.Apply(2000, core.Release("aa", 1)) // after the copy: not in it
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = snap.WriteTo(&buf)
	require.NoError(t, err)
	want, err := snapfile.NewHeader(buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, want.String(), h.String())
	require.NoError(t, snapfile.Verify(h, buf.Bytes()))
	require.Error(t, snapfile.Verify(h, buf.Bytes()[:buf.Len()-1]), "a stream cut short is refused")
}
