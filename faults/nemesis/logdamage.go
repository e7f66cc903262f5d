package nemesis

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// This file is DamageLog's locator: where, in a file of a Raft log store,
// the payload of an appended entry lies, so that the damage falls on bytes
// the store has to give back. A flip at a fixed distance from the end of
// the records can fall on bytes no entry holds (raft-wal's 8-byte frame
// padding and the commit frames of earlier batches, etcd's record
// padding), and a node that starts with such damage has lost nothing.

// LogFormat is the on-disk format of one file of a Raft log store.
type LogFormat string

// The formats DamageSpot reads.
const (
	// RaftWALSegment: a segment file of github.com/hashicorp/raft-wal (the
	// hashicorp backend's wal store): a 32-byte header, then frames of an
	// 8-byte header and a payload padded to 8 bytes; each appended batch
	// is entry frames ended by a commit frame holding the batch's CRC.
	RaftWALSegment LogFormat = "raft-wal"
	// EtcdWALSegment: a segment file of etcd's storage/wal (the etcd
	// backend's wal store): records of a little-endian length word (its top
	// byte gives the padding to 8 bytes) and a walpb.Record, whose CRC is
	// chained over every record before it.
	EtcdWALSegment LogFormat = "etcd-wal"
	// BadgerMemtableLog: a badger memtable write-ahead log, *.mem (both
	// backends' badger store): a 20-byte header, then entries of a header,
	// key, value and CRC-32C; a transaction's entries count once its
	// end-of-transaction entry follows.
	BadgerMemtableLog LogFormat = "badger-mem"
)

// DamageBytes is how many bytes DamageLog flips.
const DamageBytes = 4

// minPayload is the smallest payload DamageSpot damages: a command, not
// the empty entry a new leader appends.
const minPayload = 2 * DamageBytes

// ErrNoEntryToDamage: the file holds no entry at or below the durable
// index with a payload of at least minPayload bytes.
var ErrNoEntryToDamage = errors.New("nemesis: no durable entry to damage in the log file")

// EntryPayload is where the payload of one appended Raft entry (the
// entry's data: the command) lies in a log file: b[Off:Off+Len].
type EntryPayload struct {
	Index    uint64
	Off, Len int
}

// Entries returns the entries of log file b of format f that its store
// reads back, in file order, with where each one's payload lies. It stops
// at the end of the written records (zeros: preallocated space) and at
// the first record it cannot read whole (a torn write); an entry of an
// unfinished batch (no raft-wal commit frame, no badger end of
// transaction after it) is left out, as the store drops it on reopen.
// Errors: an unknown format, or a file that is not of it.
func Entries(f LogFormat, b []byte) ([]EntryPayload, error) {
	switch f {
	case RaftWALSegment:
		return raftWALEntries(b)
	case EtcdWALSegment:
		return etcdWALEntries(b)
	case BadgerMemtableLog:
		return badgerMemEntries(b)
	}
	return nil, fmt.Errorf("nemesis: unknown log format %q", f)
}

// DamageSpot returns the offset in log file b of format f of the
// DamageBytes to flip, and the entry they belong to: the middle of the
// payload of the newest entry whose index is at most durable (the last
// index the node's watermark records as durably appended; see
// docs/design.md#storage-and-recovery) and whose payload holds at least
// minPayload bytes. A node whose log file has that damage must refuse to
// start, on every store: the damaged record fails its CRC when read back
// (etcd's WAL checks every record; raft-wal entries carry a CRC of
// ticketd's own that the store's full read at start checks), or the store
// cuts its log short before the entry (raft-wal drops a last batch whose
// commit CRC fails; badger's replay of its memtable log stops at a bad
// entry; etcd's WAL cuts off a record it takes for a torn write), which the
// watermark refuses, as the entry is at or below it. Errors: Entries', or
// ErrNoEntryToDamage.
func DamageSpot(f LogFormat, b []byte, durable uint64) (int, EntryPayload, error) {
	entries, err := Entries(f, b)
	if err != nil {
		return 0, EntryPayload{}, err
	}
	for j := len(entries) - 1; j >= 0; j-- {
		if e := entries[j]; e.Index <= durable && e.Len >= minPayload {
			return e.Off + (e.Len-DamageBytes)/2, e, nil
		}
	}
	return 0, EntryPayload{}, fmt.Errorf("%w (%d entries, durable up to index %d)", ErrNoEntryToDamage, len(entries), durable)
}

// raft-wal's segment layout (github.com/hashicorp/raft-wal, segment/format.go).
const (
	raftWALMagic          = 0x58eb6b0d
	raftWALFileHeaderLen  = 32
	raftWALFrameHeaderLen = 8
	raftWALFrameEntry     = 1
	raftWALFrameIndex     = 2
	raftWALFrameCommit    = 3
)

// raftWALEntries reads a raft-wal segment's frames. An entry frame's
// payload is raft-wal's BinaryCodec encoding of the raft.Log (codec.go):
// uvarints Index, Term, Type, then the length of Data and Data.
func raftWALEntries(b []byte) ([]EntryPayload, error) {
	if len(b) < raftWALFileHeaderLen || binary.LittleEndian.Uint32(b) != raftWALMagic {
		return nil, fmt.Errorf("nemesis: not a raft-wal segment (no header)")
	}
	var out, batch []EntryPayload
	off := raftWALFileHeaderLen
	for off+raftWALFrameHeaderLen <= len(b) {
		typ, n := b[off], int(binary.LittleEndian.Uint32(b[off+4:]))
		body := off + raftWALFrameHeaderLen
		switch typ {
		case raftWALFrameCommit:
			out = append(out, batch...)
			batch = nil
			off = body
			continue
		case raftWALFrameEntry, raftWALFrameIndex:
		default: // zeros after the last frame, or a damaged header
			return out, nil
		}
		next := body + n + (raftWALFrameHeaderLen-n%raftWALFrameHeaderLen)%raftWALFrameHeaderLen
		if next > len(b) {
			return out, nil
		}
		if typ == raftWALFrameEntry {
			e, ok := raftWALEntry(b[body:body+n], body)
			if !ok {
				return out, nil
			}
			batch = append(batch, e)
		}
		off = next
	}
	return out, nil
}

// raftWALEntry decodes the head of one BinaryCodec payload p, which starts
// at offset base of the file.
func raftWALEntry(p []byte, base int) (EntryPayload, bool) {
	var fields [4]uint64 // Index, Term, Type, len(Data)
	at := 0
	for i := range fields {
		v, n := binary.Uvarint(p[at:])
		if n <= 0 {
			return EntryPayload{}, false
		}
		fields[i], at = v, at+n
	}
	if fields[3] > uint64(len(p)-at) {
		return EntryPayload{}, false
	}
	return EntryPayload{Index: fields[0], Off: base + at, Len: int(fields[3])}, true
}

// etcd's WAL frame (go.etcd.io/etcd/server/v3/storage/wal, encoder.go):
// the record's length in the low 56 bits of a little-endian word; when
// the top bit is set, its low 3 bits are the padding after the record.
const etcdWALFrameLen = 8

func etcdWALEntries(b []byte) ([]EntryPayload, error) {
	var out []EntryPayload
	for off := 0; off+etcdWALFrameLen <= len(b); {
		word := binary.LittleEndian.Uint64(b[off:])
		if word == 0 { // preallocated space after the last record
			break
		}
		n := int(word &^ (0xff << 56))
		pad := 0
		if word>>63 == 1 {
			pad = int(word >> 56 & 0x7)
		}
		start := off + etcdWALFrameLen
		if n > len(b)-start-pad {
			break
		}
		raw := b[start : start+n]
		var rec walpb.Record
		if err := proto.Unmarshal(raw, &rec); err != nil {
			break
		}
		if rec.GetType() == wal.EntryType {
			var e raftpb.Entry
			if err := proto.Unmarshal(rec.GetData(), &e); err != nil {
				break
			}
			recData := start + fieldOffset(raw, rec.GetData())
			out = append(out, EntryPayload{Index: e.GetIndex(), Off: recData + fieldOffset(rec.GetData(), e.GetData()), Len: len(e.GetData())})
		}
		off = start + n + pad
	}
	return out, nil
}

// fieldOffset returns where the bytes field value lies in msg, the
// protobuf encoding holding it: at the end, as both walpb.Record.data and
// raftpb.Entry.Data are their message's last field, or else its last
// occurrence.
func fieldOffset(msg, value []byte) int {
	if bytes.HasSuffix(msg, value) {
		return len(msg) - len(value)
	}
	return bytes.LastIndex(msg, value)
}

// badger's memtable log (github.com/dgraph-io/badger/v4: memtable.go,
// structs.go, value.go).
const (
	badgerLogHeaderLen = 20 // key id and base IV, before the first entry
	badgerValuePointer = 1 << 1
	badgerTxn          = 1 << 6
	badgerFinTxn       = 1 << 7
)

// badgerLogPrefixes are the key prefixes under which ticketd's badger
// stores keep Raft entries, each followed by the index (8 bytes, big
// endian): the hashicorp backend's (backends/hashicorp/logstore.go) and
// the etcd backend's (backends/etcd/internal/raftstore/store.go).
var badgerLogPrefixes = [][]byte{[]byte("hlog/"), []byte("etcd/entry/")}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// badgerMemEntries reads a memtable log's entries: a header (meta and
// user-meta bytes, uvarints key length, value length and expiry), the key
// (the user key and 8 bytes of version), the value and a big-endian
// CRC-32C of all three.
func badgerMemEntries(b []byte) ([]EntryPayload, error) {
	if len(b) < badgerLogHeaderLen {
		return nil, fmt.Errorf("nemesis: not a badger memtable log (%d bytes)", len(b))
	}
	var out, txn []EntryPayload
	off := badgerLogHeaderLen
	for off+2 < len(b) {
		meta := b[off]
		var lens [3]uint64 // key, value, expiry
		at := off + 2
		for i := range lens {
			v, n := binary.Uvarint(b[at:])
			if n <= 0 {
				return out, nil
			}
			lens[i], at = v, at+n
		}
		klen, vlen := lens[0], lens[1]
		if klen == 0 || klen > uint64(len(b)) || vlen > uint64(len(b)) {
			return out, nil // zeros after the last entry
		}
		key, val := at, at+int(klen)
		end := val + int(vlen)
		if end+4 > len(b) || crc32.Checksum(b[off:end], castagnoli) != binary.BigEndian.Uint32(b[end:]) {
			return out, nil
		}
		e, isLog := badgerLogEntry(b[key:val], val, int(vlen))
		switch {
		case meta&badgerFinTxn != 0:
			out = append(out, txn...)
			txn = nil
		case isLog && meta&badgerValuePointer == 0 && meta&badgerTxn != 0:
			txn = append(txn, e)
		case isLog && meta&badgerValuePointer == 0:
			out = append(out, e)
		}
		off = end + 4
	}
	return out, nil
}

// badgerLogEntry reports whether key (with its 8 bytes of version) is a
// Raft entry's, and where its value lies.
func badgerLogEntry(key []byte, val, vlen int) (EntryPayload, bool) {
	for _, p := range badgerLogPrefixes {
		if len(key) == len(p)+16 && bytes.HasPrefix(key, p) {
			return EntryPayload{Index: binary.BigEndian.Uint64(key[len(p):]), Off: val, Len: vlen}, true
		}
	}
	return EntryPayload{}, false
}
