package snapfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// Sentinel errors of package snapfile. Compare with errors.Is.
var (
	// ErrNotSnapshot: the file does not start with Magic.
	ErrNotSnapshot = errors.New("snapfile: not a ticketd snapshot file")
	// ErrUnsupported: the header's FormatVersion is not one this build reads.
	ErrUnsupported = errors.New("snapfile: unsupported snapshot format version")
	// ErrChecksum: the data does not match the header (size or SHA-256), or
	// core refuses it: the file is damaged or cut short.
	ErrChecksum = errors.New("snapfile: snapshot data does not match its checksum")
)

// Magic starts every snapshot file.
const Magic = "TKTDSNAP"

// FormatVersion is the header's FormatVersion this build writes and reads.
const FormatVersion = 1

// MaxHeaderBytes bounds the header's declared length (bytes), checked
// before allocation.
const MaxHeaderBytes = 64 << 10

// NewHeader describes data, core snapshot bytes: FormatVersion, Index (the
// applied index), LastToken, LocksHeld, SizeBytes and Sha256, read by
// core.CheckSnapshot (which verifies data exactly as a restore does,
// without building the table). The caller fills in Backend, Term, NodeId
// and CreatedUnixMs. Errors wrap ErrChecksum (and core.ErrDecode) for data
// core refuses.
func NewHeader(data []byte) (*ticketv1.SnapshotHeader, error) {
	info, err := core.CheckSnapshot(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrChecksum, err)
	}
	sum := sha256.Sum256(data)
	return &ticketv1.SnapshotHeader{
		FormatVersion: FormatVersion,
		Index:         info.AppliedIndex,
		LastToken:     info.LastToken,
		LocksHeld:     int64(info.Keys),
		Sha256:        sum[:],
		SizeBytes:     uint64(len(data)),
	}, nil
}

// HeaderOf describes snap, a consistent copy of a live state machine, as
// NewHeader describes its bytes, without holding them: it writes snap once
// through SHA-256 to learn SizeBytes and Sha256, so that the caller can send
// the header first and then stream snap.WriteTo in chunks (a second pass
// writes the same bytes: snapshots are deterministic,
// docs/design.md#storage-and-recovery). Memory is O(1) in the table; a
// reader still verifies size and checksum (Verify), which tells a stream cut
// short or changed from a complete one. Errors are the hash writer's (none).
func HeaderOf(snap *core.Snapshot) (*ticketv1.SnapshotHeader, error) {
	sum := sha256.New()
	size, err := snap.WriteTo(sum)
	if err != nil {
		return nil, fmt.Errorf("snapfile: checksum snapshot: %w", err)
	}
	return &ticketv1.SnapshotHeader{
		FormatVersion: FormatVersion,
		Index:         snap.AppliedIndex(),
		LastToken:     snap.LastToken(),
		LocksHeld:     int64(snap.Len()),
		Sha256:        sum.Sum(nil),
		SizeBytes:     uint64(size),
	}, nil
}

// WriteHeader writes Magic and h to w; the caller then writes the data.
// Errors are w's or the marshalling's.
func WriteHeader(w io.Writer, h *ticketv1.SnapshotHeader) error {
	hb, err := proto.MarshalOptions{Deterministic: true}.Marshal(h)
	if err != nil {
		return fmt.Errorf("snapfile: marshal header: %w", err)
	}
	var head [len(Magic) + 4]byte
	copy(head[:], Magic)
	binary.BigEndian.PutUint32(head[len(Magic):], uint32(len(hb)))
	if _, err := w.Write(head[:]); err != nil {
		return fmt.Errorf("snapfile: write header: %w", err)
	}
	if _, err := w.Write(hb); err != nil {
		return fmt.Errorf("snapfile: write header: %w", err)
	}
	return nil
}

// ReadHeader reads Magic and the header from r, leaving r at the data.
// Errors: ErrNotSnapshot, ErrUnsupported, or r's (io.ErrUnexpectedEOF for
// a file cut short).
func ReadHeader(r io.Reader) (*ticketv1.SnapshotHeader, error) {
	var head [len(Magic) + 4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: shorter than its header", ErrNotSnapshot)
		}
		return nil, fmt.Errorf("snapfile: read header: %w", err)
	}
	if string(head[:len(Magic)]) != Magic {
		return nil, ErrNotSnapshot
	}
	n := binary.BigEndian.Uint32(head[len(Magic):])
	if n > MaxHeaderBytes {
		return nil, fmt.Errorf("%w: header of %d bytes (limit %d)", ErrNotSnapshot, n, MaxHeaderBytes)
	}
	hb := make([]byte, n)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, fmt.Errorf("snapfile: read header: %w", io.ErrUnexpectedEOF)
	}
	h := &ticketv1.SnapshotHeader{}
	if err := proto.Unmarshal(hb, h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrNotSnapshot, err)
	}
	if h.GetFormatVersion() != FormatVersion {
		return nil, fmt.Errorf("%w: %d (this build reads %d)", ErrUnsupported, h.GetFormatVersion(), FormatVersion)
	}
	return h, nil
}

// Verify checks data against h: its size, its SHA-256, and that core
// accepts it with the index and last token h names. Errors wrap
// ErrChecksum.
func Verify(h *ticketv1.SnapshotHeader, data []byte) error {
	if uint64(len(data)) != h.GetSizeBytes() {
		return fmt.Errorf("%w: %d bytes of data, header says %d", ErrChecksum, len(data), h.GetSizeBytes())
	}
	if sum := sha256.Sum256(data); !bytes.Equal(sum[:], h.GetSha256()) {
		return fmt.Errorf("%w: sha256 %x, header says %x", ErrChecksum, sum[:], h.GetSha256())
	}
	got, err := NewHeader(data)
	if err != nil {
		return err
	}
	if got.GetIndex() != h.GetIndex() || got.GetLastToken() != h.GetLastToken() {
		return fmt.Errorf("%w: data at index %d, last token %d; header says %d, %d",
			ErrChecksum, got.GetIndex(), got.GetLastToken(), h.GetIndex(), h.GetLastToken())
	}
	return nil
}

// Read reads a whole snapshot file from r, at most maxBytes of data
// (bytes; 0 means 1 GiB), and returns its verified header and data. Errors:
// ReadHeader's, ErrChecksum (Verify), or r's.
func Read(r io.Reader, maxBytes int64) (*ticketv1.SnapshotHeader, []byte, error) {
	if maxBytes <= 0 {
		maxBytes = 1 << 30
	}
	h, err := ReadHeader(r)
	if err != nil {
		return nil, nil, err
	}
	if h.GetSizeBytes() > uint64(maxBytes) {
		return nil, nil, fmt.Errorf("%w: %d bytes of data (limit %d)", ErrChecksum, h.GetSizeBytes(), maxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(h.GetSizeBytes())+1))
	if err != nil {
		return nil, nil, fmt.Errorf("snapfile: read data: %w", err)
	}
	if err := Verify(h, data); err != nil {
		return nil, nil, err
	}
	return h, data, nil
}
