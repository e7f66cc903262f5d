package etcd

import (
	"encoding/binary"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ticketd/ticketd/core"
)

// Entry envelope. The Data of every EntryNormal that carries a ticketd command
// is
//
//	byte 0     entryVersion
//	bytes 1-8  proposal id, big-endian (the proposer's waiter key)
//	bytes 9-   core.Encode(cmd), the payload StateMachine.ApplyEntry decodes
//
// An EntryNormal with empty Data is the entry etcd raft appends when a leader
// is elected; it carries no command (StateMachine.Skip).
const (
	entryVersion    byte = 1
	entryHeaderSize      = 9
)

// entryCapHint is the buffer an entry's Data starts with: room for the
// envelope and a Grant of typical key and owner lengths, so encoding it
// allocates once (core.AppendEncode grows it for longer commands).
const entryCapHint = 96

// encodeEntry returns the Data of an entry carrying cmd (core.AppendEncode
// after the envelope's header, in one buffer), with proposal id 0 until
// setEntryID. Errors are core.Encode's.
func encodeEntry(cmd core.Command) ([]byte, error) {
	out := make([]byte, entryHeaderSize, entryCapHint)
	out[0] = entryVersion
	return core.AppendEncode(out, cmd)
}

// setEntryID writes the proposal id into data, made by encodeEntry.
func setEntryID(data []byte, id uint64) {
	binary.BigEndian.PutUint64(data[1:entryHeaderSize], id)
}

// decodeEntry splits Data written by encodeEntry. Errors wrap core.ErrDecode.
func decodeEntry(data []byte) (id uint64, payload []byte, err error) {
	if len(data) < entryHeaderSize {
		return 0, nil, fmt.Errorf("%w: entry of %d bytes has no envelope", core.ErrDecode, len(data))
	}
	if data[0] != entryVersion {
		return 0, nil, fmt.Errorf("%w: unknown entry envelope version %d", core.ErrDecode, data[0])
	}
	return binary.BigEndian.Uint64(data[1:entryHeaderSize]), data[entryHeaderSize:], nil
}

// Snapshot envelope. The Data of every raftpb.Snapshot the backend makes is
//
//	byte 0   snapshotVersion
//	uvarint  length of the address book
//	bytes    the address book (addressBook.encode)
//	bytes    the core snapshot (core.Snapshot.WriteTo), verified by its own CRC
//
// so a node that joins by snapshot learns its peers' addresses with the state.
const snapshotVersion byte = 1

// encodeSnapshotData builds the Data of a snapshot: sm writes the core
// snapshot (a core.Snapshot, or the bytes of one).
func encodeSnapshotData(book addressBook, sm io.WriterTo) ([]byte, error) {
	b := book.encode()
	out := append([]byte{snapshotVersion}, protowire.AppendVarint(nil, uint64(len(b)))...)
	out = append(out, b...)
	w := appendWriter{buf: out}
	if _, err := sm.WriteTo(&w); err != nil {
		return nil, fmt.Errorf("etcd: write snapshot: %w", err)
	}
	return w.buf, nil
}

// decodeSnapshotData splits Data written by encodeSnapshotData. Errors wrap
// core.ErrDecode.
func decodeSnapshotData(data []byte) (addressBook, []byte, error) {
	if len(data) == 0 || data[0] != snapshotVersion {
		return nil, nil, fmt.Errorf("%w: unknown snapshot envelope", core.ErrDecode)
	}
	n, l := protowire.ConsumeVarint(data[1:])
	if l < 0 || uint64(len(data)-1-l) < n {
		return nil, nil, fmt.Errorf("%w: truncated snapshot envelope", core.ErrDecode)
	}
	rest := data[1+l:]
	book, err := decodeBook(rest[:n])
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", core.ErrDecode, err)
	}
	return book, rest[n:], nil
}

// appendWriter is an io.Writer appending to buf.
type appendWriter struct{ buf []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}
