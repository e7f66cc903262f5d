package h2hold

import (
	"bytes"
	"encoding/binary"
)

// preface is the HTTP/2 client connection preface (RFC 9113 §3.4): the
// first bytes a client sends on an HTTP/2 connection.
var preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// IsPreface reports whether p, the first bytes of a connection in the
// client's direction, begins with the HTTP/2 client preface.
func IsPreface(p []byte) bool { return bytes.HasPrefix(p, preface) }

// HTTP/2 frame header fields (RFC 9113 §4.1, §6.2).
const (
	frameHeaderLen  = 9
	frameHeaders    = 0x1
	flagEndStream   = 0x1
	flagEndHeaders  = 0x4
	streamIDMaskBit = 0x7fffffff
)

// LoneHeaders reports whether p is exactly one HTTP/2 HEADERS frame with
// its whole header block (END_HEADERS) on a client-initiated (odd) stream,
// not ending that stream: a request's or a response's headers whose body
// follows.
func LoneHeaders(p []byte) bool {
	if len(p) < frameHeaderLen {
		return false
	}
	length := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
	flags := p[4]
	stream := binary.BigEndian.Uint32(p[5:9]) & streamIDMaskBit
	return len(p) == frameHeaderLen+length && p[3] == frameHeaders &&
		flags&flagEndStream == 0 && flags&flagEndHeaders != 0 && stream%2 == 1
}
