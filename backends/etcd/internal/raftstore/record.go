package raftstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"google.golang.org/protobuf/proto"
)

// castagnoli is the CRC-32C table every record checksum uses.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcSize is the length in bytes of the checksum in front of every record.
const crcSize = 4

// sealRecord returns body prefixed with its 4-byte big-endian CRC-32C.
func sealRecord(body []byte) []byte {
	out := make([]byte, crcSize, crcSize+len(body))
	binary.BigEndian.PutUint32(out, crc32.Checksum(body, castagnoli))
	return append(out, body...)
}

// openRecord verifies the checksum of a record written by sealRecord and
// returns its body. what names the record in the error, which wraps ErrCorrupt.
func openRecord(what string, rec []byte) ([]byte, error) {
	if len(rec) < crcSize {
		return nil, fmt.Errorf("%w: %s: record of %d bytes is shorter than its checksum", ErrCorrupt, what, len(rec))
	}
	body := rec[crcSize:]
	want := binary.BigEndian.Uint32(rec)
	if got := crc32.Checksum(body, castagnoli); got != want {
		return nil, fmt.Errorf("%w: %s: checksum %08x, want %08x (flipped or cut bytes)", ErrCorrupt, what, got, want)
	}
	return body, nil
}

// marshalRecord marshals m and seals it with sealRecord.
func marshalRecord(m proto.Message) ([]byte, error) {
	body, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("raftstore: marshal %T: %w", m, err)
	}
	return sealRecord(body), nil
}

// unmarshalRecord verifies rec and unmarshals its body into m.
func unmarshalRecord(what string, rec []byte, m proto.Message) error {
	body, err := openRecord(what, rec)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(body, m); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, what, err)
	}
	return nil
}

// snapshotRecord is the value under keySnapshot: the compaction point (index
// and term of the last entry dropped from the log) followed by the snapshot,
// so that the two always change together.
func encodeSnapshotRecord(truncIndex, truncTerm uint64, snap proto.Message) ([]byte, error) {
	body := make([]byte, 16, 16+proto.Size(snap))
	binary.BigEndian.PutUint64(body[0:8], truncIndex)
	binary.BigEndian.PutUint64(body[8:16], truncTerm)
	body, err := proto.MarshalOptions{}.MarshalAppend(body, snap)
	if err != nil {
		return nil, fmt.Errorf("raftstore: marshal snapshot: %w", err)
	}
	return sealRecord(body), nil
}

// decodeSnapshotRecord parses a value written by encodeSnapshotRecord into snap.
func decodeSnapshotRecord(rec []byte, snap proto.Message) (truncIndex, truncTerm uint64, err error) {
	body, err := openRecord("snapshot", rec)
	if err != nil {
		return 0, 0, err
	}
	if len(body) < 16 {
		return 0, 0, fmt.Errorf("%w: snapshot: record of %d bytes has no compaction point", ErrCorrupt, len(body))
	}
	if err := proto.Unmarshal(body[16:], snap); err != nil {
		return 0, 0, fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
	}
	return binary.BigEndian.Uint64(body[0:8]), binary.BigEndian.Uint64(body[8:16]), nil
}
