package hashicorp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/hashicorp/raft"
)

// This file is the CRC-32C every entry carries in the raft-wal store.

// errEntryChecksum: a raft-wal entry does not match the CRC stored with it
// (sealEntries): its segment file was damaged after the write.
var errEntryChecksum = errors.New("raft-wal: entry checksum mismatch")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Each entry walStore gives raft-wal carries a CRC-32C (Castagnoli) of its
// own, over its index, term, type, append time, data and extensions,
// appended to its Data (4 bytes, little endian, as raft-wal's integers)
// and checked and removed on every read, so hashicorp/raft never sees it.
// raft-wal checks a CRC over each appended batch, but only over the tail
// segment's last batch when it opens (a torn write) and none on reads:
// without the entry's own CRC a flipped byte in an older batch would be
// served as an entry (its README leaves latent corruption to the file
// system). With it, and the full read openWALStore makes of the retained
// log, damage anywhere in the log is refused at start, as etcd's WAL
// refuses a CRC mismatch before its last record. (raft-wal's pluggable
// Codec would be the natural place, but v0.4.1 records every new segment
// as written by its built-in codec and then refuses to reopen it with
// another.)

// entrySum returns the CRC-32C of l's fields, with data as its Data.
func entrySum(l *raft.Log, data []byte) uint32 {
	var hdr [5 * binary.MaxVarintLen64]byte
	b := binary.AppendUvarint(hdr[:0], l.Index)
	b = binary.AppendUvarint(b, l.Term)
	b = binary.AppendUvarint(b, uint64(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.AppendVarint(b, at)
	b = binary.AppendUvarint(b, uint64(len(data)))
	sum := crc32.Update(0, castagnoli, b)
	sum = crc32.Update(sum, castagnoli, data)
	return crc32.Update(sum, castagnoli, l.Extensions)
}

// sealEntries returns copies of logs whose Data ends with the entry's
// CRC-32C; logs are not modified.
func sealEntries(logs []*raft.Log) []*raft.Log {
	out := make([]*raft.Log, len(logs))
	for i, l := range logs {
		c := *l
		data := make([]byte, len(l.Data), len(l.Data)+4)
		copy(data, l.Data)
		c.Data = binary.LittleEndian.AppendUint32(data, entrySum(l, l.Data))
		out[i] = &c
	}
	return out
}

// openEntry checks the CRC-32C that sealEntries appended to l.Data and
// removes it. Errors: errEntryChecksum (wrapped, naming the index).
func openEntry(l *raft.Log) error {
	n := len(l.Data) - 4
	if n < 0 {
		return fmt.Errorf("%w: entry %d: %d bytes of data", errEntryChecksum, l.Index, len(l.Data))
	}
	data := l.Data[:n:n]
	if entrySum(l, data) != binary.LittleEndian.Uint32(l.Data[n:]) {
		return fmt.Errorf("%w: entry %d", errEntryChecksum, l.Index)
	}
	l.Data = data
	return nil
}
