package hashicorp

import (
	"encoding/binary"
	"fmt"
)

// This file follows the msgpack requests on an accepted peer connection
// without decoding them, so that boundedConn can bound each one and check
// its sender.

// rpcInstallSnapshot is hashicorp's type byte of an InstallSnapshot request
// (net_transport.go: rpcAppendEntries, rpcRequestVote, rpcInstallSnapshot,
// ...); the request's msgpack header is followed by Size bytes of data.
const rpcInstallSnapshot = 2

// maxFrameDepth bounds the nesting of one msgpack request (raft's deepest
// is AppendEntriesRequest → Entries → Log, 3 levels).
const maxFrameDepth = 16

// msgFramer follows the requests arriving on an accepted connection of
// hashicorp's NetworkTransport without decoding them: each is one type
// byte, one msgpack object (the request) and, for InstallSnapshot, the
// request's Size bytes of snapshot data. It knows where every request
// starts and ends, so it bounds each one exactly: the type byte and object
// at maxMessage bytes, because go-msgpack copies a large []byte field
// quadratically as it decodes it (decByteSlice grows 256 KiB at a time),
// and the snapshot data, which raft copies into the snapshot file, at
// maxSnapshot bytes, taken from the declared Size before any of it is read.
// It is fed every byte read, in order, by one goroutine.
type msgFramer struct {
	maxMessage  int64
	maxSnapshot int64

	state    frameState
	rpcType  byte
	msgBytes int64   // bytes of the current type byte and object
	stack    []int64 // items left in each open container; top = innermost
	skip     int64   // payload bytes of a str/bin/ext still to pass
	hdr      [9]byte // a multi-byte header (type byte first) being read
	hdrLen   int     // bytes of hdr read
	hdrNeed  int     // bytes hdr needs, type byte included
	dataLeft int64   // InstallSnapshot data bytes still to pass

	// Capturing InstallSnapshot's Size: a top-level key that is "Size"
	// makes the next top-level integer value the declared data length.
	key     []byte // the top-level key being read (short strings only)
	keyOpen bool
	isSize  bool
	size    int64

	// wantID, when not empty, is the peer certificate's common name
	// (over mutual TLS): a request claiming another member id in its
	// RPCHeader.ID (the top-level "ID"; raft inlines RPCHeader) is
	// refused (ErrForgedSender), and so is every request once member
	// refuses wantID (peergate.Gate.Check: not a current member, e.g.
	// removed since the connection opened).
	wantID string
	member func(id string) error
	isID   bool   // the next top-level value is the "ID"
	idOpen bool   // reading the ID's bytes
	id     []byte // the ID claimed so far
	sawID  bool
}

type frameState uint8

const (
	frameType   frameState = iota // waiting for a request's type byte
	frameObject                   // inside the request's msgpack object
	frameData                     // inside InstallSnapshot's data
)

// frameErr builds the error of a request the framer refuses.
func frameErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMessageTooLarge}, args...)...)
}

// idle reports whether every byte fed so far belongs to complete requests.
func (f *msgFramer) idle() bool { return f.state == frameType }

// inSnapshot reports whether the framer is inside InstallSnapshot data.
func (f *msgFramer) inSnapshot() bool { return f.state == frameData }

// feed follows p. It fails, with an error wrapping ErrMessageTooLarge, on
// a request object longer than maxMessage, declared snapshot data longer
// than maxSnapshot, or a malformed or too deeply nested object. started
// reports that a request began in p; snapshot that a snapshot's data
// began in p (of declared size bytes).
func (f *msgFramer) feed(p []byte) (started, snapshot bool, size int64, err error) {
	for len(p) > 0 {
		switch f.state {
		case frameType:
			f.rpcType = p[0]
			f.msgBytes = 1
			f.stack = append(f.stack[:0], 1)
			f.skip, f.hdrLen, f.keyOpen, f.isSize, f.size = 0, 0, false, false, -1
			f.isID, f.idOpen, f.id, f.sawID = false, false, f.id[:0], false
			f.state = frameObject
			started = true
			p = p[1:]
		case frameData:
			n := min(int64(len(p)), f.dataLeft)
			f.dataLeft -= n
			p = p[n:]
			if f.dataLeft == 0 {
				f.state = frameType
			}
		case frameObject:
			n, err := f.object(p)
			f.msgBytes += int64(n)
			if f.msgBytes > f.maxMessage {
				return started, snapshot, 0, frameErr("request of more than %d bytes", f.maxMessage)
			}
			if err != nil {
				return started, snapshot, 0, err
			}
			p = p[n:]
			if len(f.stack) > 0 {
				continue
			}
			f.state = frameType
			if err := f.checkSender(); err != nil {
				return started, snapshot, 0, err
			}
			if f.rpcType == rpcInstallSnapshot {
				if f.size < 0 || f.size > f.maxSnapshot {
					return started, snapshot, 0, frameErr("snapshot of %d bytes declared, limit %d", f.size, f.maxSnapshot)
				}
				if f.size > 0 {
					f.state, f.dataLeft = frameData, f.size
					snapshot, size = true, f.size
				}
			}
		}
	}
	return started, snapshot, size, nil
}

// object consumes bytes of the current msgpack object from p until it is
// complete (f.stack empty) or p ends, and returns how many it consumed.
func (f *msgFramer) object(p []byte) (int, error) {
	used := 0
	for used < len(p) && len(f.stack) > 0 {
		if f.skip > 0 {
			n := min(int64(len(p)-used), f.skip)
			if f.keyOpen {
				f.key = append(f.key, p[used:used+int(n)]...)
			}
			if f.idOpen {
				f.id = append(f.id, p[used:used+int(n)]...)
			}
			f.skip -= n
			used += int(n)
			if f.skip == 0 {
				f.endString()
			}
			continue
		}
		if f.hdrLen == 0 {
			f.hdr[0] = p[used]
			f.hdrLen = 1
			used++
			need, err := headerLen(f.hdr[0])
			if err != nil {
				return used, err
			}
			f.hdrNeed = need
		}
		for f.hdrLen < f.hdrNeed && used < len(p) {
			f.hdr[f.hdrLen] = p[used]
			f.hdrLen++
			used++
		}
		if f.hdrLen < f.hdrNeed {
			break
		}
		f.hdrLen = 0
		if err := f.item(f.hdr[:f.hdrNeed]); err != nil {
			return used, err
		}
	}
	return used, nil
}

// checkSender refuses a complete request whose claimed ID is not wantID,
// or whose certificate names no current member (member's error).
func (f *msgFramer) checkSender() error {
	if f.wantID == "" {
		return nil
	}
	if !f.sawID || string(f.id) != f.wantID {
		return fmt.Errorf("%w: request claims member %q, certificate names %q", ErrForgedSender, f.id, f.wantID)
	}
	if f.member != nil {
		if err := f.member(f.wantID); err != nil {
			return err
		}
	}
	return nil
}

// topKey reports whether the next item is a key of the request's map
// (f.stack[0] counts the request itself, f.stack[1] its map's items).
func (f *msgFramer) topKey() bool { return len(f.stack) == 2 && f.stack[1]%2 == 0 }

// topValue reports whether the next item is a value of the request's map.
func (f *msgFramer) topValue() bool { return len(f.stack) == 2 && f.stack[1]%2 == 1 }

// item handles one complete msgpack header h: a scalar, a string, binary
// or ext header (whose payload is then skipped), or a container header.
func (f *msgFramer) item(h []byte) error {
	b := h[0]
	var payload int64  // str/bin/ext bytes that follow
	var children int64 // items of a container
	container, isString := false, false
	intVal, isInt := int64(0), true
	switch {
	case b <= 0x7f:
		intVal = int64(b)
	case b >= 0xe0:
		intVal = int64(int8(b))
	case b <= 0x8f:
		container, children = true, 2*int64(b&0x0f)
	case b <= 0x9f:
		container, children = true, int64(b&0x0f)
	case b <= 0xbf:
		isString, payload = true, int64(b&0x1f)
	case b == 0xc4, b == 0xd9:
		isString, payload = true, int64(h[1])
	case b == 0xc5, b == 0xda:
		isString, payload = true, int64(binary.BigEndian.Uint16(h[1:]))
	case b == 0xc6, b == 0xdb:
		isString, payload = true, int64(binary.BigEndian.Uint32(h[1:]))
	case b == 0xc7:
		payload = int64(h[1])
	case b == 0xc8:
		payload = int64(binary.BigEndian.Uint16(h[1:]))
	case b == 0xc9:
		payload = int64(binary.BigEndian.Uint32(h[1:]))
	case b == 0xcc:
		intVal = int64(h[1])
	case b == 0xcd:
		intVal = int64(binary.BigEndian.Uint16(h[1:]))
	case b == 0xce:
		intVal = int64(binary.BigEndian.Uint32(h[1:]))
	case b == 0xcf:
		intVal = int64(min(binary.BigEndian.Uint64(h[1:]), 1<<62))
	case b == 0xd0:
		intVal = int64(int8(h[1]))
	case b == 0xd1:
		intVal = int64(int16(binary.BigEndian.Uint16(h[1:])))
	case b == 0xd2:
		intVal = int64(int32(binary.BigEndian.Uint32(h[1:])))
	case b == 0xd3:
		intVal = int64(binary.BigEndian.Uint64(h[1:]))
	case b >= 0xd4 && b <= 0xd8:
		payload = 1 << (b - 0xd4)
	case b == 0xdc:
		container, children = true, int64(binary.BigEndian.Uint16(h[1:]))
	case b == 0xdd:
		container, children = true, int64(binary.BigEndian.Uint32(h[1:]))
	case b == 0xde:
		container, children = true, 2*int64(binary.BigEndian.Uint16(h[1:]))
	case b == 0xdf:
		container, children = true, 2*int64(binary.BigEndian.Uint32(h[1:]))
	}
	isInt = isInt && (b <= 0x7f || b >= 0xe0 || (b >= 0xcc && b <= 0xd3))
	if f.topValue() && f.isSize {
		f.isSize = false
		if isInt {
			f.size = intVal // negative: refused with the snapshot
		}
	}
	idHere := false
	if f.topValue() && f.isID {
		f.isID = false
		idHere = isString && payload <= 256
		f.sawID = idHere
	}
	keyHere := f.topKey()
	f.stack[len(f.stack)-1]--
	if container && children > 0 {
		if len(f.stack) >= maxFrameDepth {
			return frameErr("request nested deeper than %d", maxFrameDepth)
		}
		f.stack = append(f.stack, children)
	}
	f.pop()
	if payload > f.maxMessage {
		return frameErr("field of %d bytes declared, limit %d", payload, f.maxMessage)
	}
	f.skip = payload
	f.keyOpen = keyHere && isString && payload <= 16
	f.key = f.key[:0]
	f.idOpen = idHere
	if payload == 0 {
		f.endString()
	}
	return nil
}

// endString ends a skipped payload; a top-level key "Size" arms capture.
func (f *msgFramer) endString() {
	if f.keyOpen {
		f.isSize = string(f.key) == "Size"
		f.isID = string(f.key) == "ID"
		f.keyOpen = false
	}
	f.idOpen = false
}

// pop removes finished containers from the stack.
func (f *msgFramer) pop() {
	for len(f.stack) > 0 && f.stack[len(f.stack)-1] == 0 {
		f.stack = f.stack[:len(f.stack)-1]
	}
}

// headerLen is the length of the msgpack header that starts with b, b
// included; 0xc1 (never used) is refused.
func headerLen(b byte) (int, error) {
	switch {
	case b <= 0xbf, b >= 0xe0, b == 0xc0, b == 0xc2, b == 0xc3:
		return 1, nil
	case b == 0xc4, b == 0xd9, b == 0xcc, b == 0xd0:
		return 2, nil
	case b == 0xc5, b == 0xda, b == 0xcd, b == 0xd1, b == 0xdc, b == 0xde:
		return 3, nil
	case b == 0xc6, b == 0xdb, b == 0xce, b == 0xd2, b == 0xca, b == 0xdd, b == 0xdf:
		return 5, nil
	case b == 0xcf, b == 0xd3, b == 0xcb:
		return 9, nil
	case b == 0xc7:
		return 3, nil // length, type
	case b == 0xc8:
		return 4, nil
	case b == 0xc9:
		return 6, nil
	case b >= 0xd4 && b <= 0xd8: // fixext: type byte, then 1..16 data bytes
		return 2, nil
	}
	return 0, frameErr("malformed request (msgpack byte %#x)", b)
}
