package httpapi

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEnvelopeScanAcrossReads: the length a message prefix declares is
// found however the body's reads split prefixes and payloads, and a
// payload's bytes are never taken for a prefix.
func TestEnvelopeScanAcrossReads(t *testing.T) {
	var body []byte
	for _, size := range []uint32{3, 0, 9} {
		body = binary.BigEndian.AppendUint32(append(body, 0), size)
		body = append(body, make([]byte, size)...)
	}
	// A payload of 9 bytes that looks like a prefix declaring 2^31.
	copy(body[len(body)-9:], []byte{0, 0x80, 0, 0, 0})
	huge := binary.BigEndian.AppendUint32([]byte{0}, maxRequestBytes+1)
	for _, piece := range []int{1, 2, 5, 7, len(body)} {
		var e envelopeScan
		var largest uint32
		for rest := body; len(rest) > 0; {
			n := min(piece, len(rest))
			largest = max(largest, e.scan(rest[:n]))
			rest = rest[n:]
		}
		require.Equal(t, uint32(9), largest, "reads of %d bytes", piece)
		var got uint32
		for i := range huge {
			got = max(got, e.scan(huge[i:i+1]))
		}
		require.Equal(t, uint32(maxRequestBytes+1), got, "reads of %d bytes", piece)
	}
}
