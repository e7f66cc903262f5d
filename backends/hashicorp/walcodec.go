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

// entryHeaderBytes is the most the varints entrySum hashes ahead of the
// data take: index, term, type, append time and data length.
const entryHeaderBytes = 5 * binary.MaxVarintLen64

// entrySum returns the CRC-32C of l's fields, with data as its Data. It
// writes the fields' varints into scratch, which needs entryHeaderBytes of
// capacity (less, or nil, allocates): the crc32 functions keep it from
// staying on the stack, so a batch shares one (sealEntries).
func entrySum(l *raft.Log, data, scratch []byte) uint32 {
	b := binary.AppendUvarint(scratch[:0], l.Index)
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
// CRC-32C; logs are not modified. The copies of one batch share four
// allocations, whatever its length: the pointers, the raft.Log values,
// one array holding every entry's data and CRC (each Data capped at its
// own end), and entrySum's scratch. raft-wal encodes them into its own
// buffers and keeps none of them (WAL.StoreLogs).
func sealEntries(logs []*raft.Log) []*raft.Log {
	size := 0
	for _, l := range logs {
		size += len(l.Data) + 4
	}
	buf := make([]byte, 0, size)
	scratch := make([]byte, 0, entryHeaderBytes)
	copies := make([]raft.Log, len(logs))
	out := make([]*raft.Log, len(logs))
	for i, l := range logs {
		start := len(buf)
		buf = append(buf, l.Data...)
		buf = binary.LittleEndian.AppendUint32(buf, entrySum(l, l.Data, scratch))
		copies[i] = *l
		copies[i].Data = buf[start:len(buf):len(buf)]
		out[i] = &copies[i]
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
	if entrySum(l, data, nil) != binary.LittleEndian.Uint32(l.Data[n:]) {
		return fmt.Errorf("%w: entry %d", errEntryChecksum, l.Index)
	}
	l.Data = data
	return nil
}
