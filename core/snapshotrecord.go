package core

import (
	"fmt"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ticketd/ticketd/core/internal/corepb"
)

// This file is the wire codec of a snapshot's lock records, the one record
// a snapshot holds per holder (a million of them at a million locks): the
// bytes of corepb.LockRecord exactly as deterministic protobuf marshalling
// writes them (fields in field-number order, zero values left out, minimal
// varints), produced and checked field by field instead of through
// protobuf's generic marshaller, which costs a size pass, a marshal and, on
// restore, an unmarshal plus a second marshal to compare against
// (snapshotReader.next). The format does not change: TestLockRecordCodec
// checks both directions against the protobuf library.

// LockRecord's field numbers (core/proto/ticketd/core/v1/core.proto).
const (
	lockRecKey         protowire.Number = 1
	lockRecToken       protowire.Number = 2
	lockRecLeaseMs     protowire.Number = 3
	lockRecOwner       protowire.Number = 4
	lockRecModIndex    protowire.Number = 5
	lockRecLockDelayMs protowire.Number = 6
	lockRecPrincipal   protowire.Number = 7
	lockRecMode        protowire.Number = 8
	lockRecLimit       protowire.Number = 9
	lockRecSession     protowire.Number = 10
)

// appendLockRecord appends l as a length-prefixed LockRecord, the bytes
// proto.MarshalOptions{Deterministic: true} gives for it. Errors: a key,
// owner or principal that is not valid UTF-8 (protobuf refuses to marshal
// such a proto3 string too).
func appendLockRecord(b []byte, l *Lock) ([]byte, error) {
	for _, s := range [...]string{l.Key, l.Owner, l.Principal} {
		if !utf8.ValidString(s) {
			return b, fmt.Errorf("snapshot: marshal: lock %q: string field contains invalid UTF-8", l.Key)
		}
	}
	size := stringFieldSize(l.Key) + varintFieldSize(l.Token) + varintFieldSize(uint64(l.LeaseMS)) +
		stringFieldSize(l.Owner) + varintFieldSize(l.ModIndex) + varintFieldSize(uint64(l.LockDelayMS)) +
		stringFieldSize(l.Principal) + varintFieldSize(uint64(l.Mode)) + varintFieldSize(uint64(l.Limit)) +
		varintFieldSize(l.Session)
	b = protowire.AppendVarint(b, uint64(size))
	b = appendStringField(b, lockRecKey, l.Key)
	b = appendVarintField(b, lockRecToken, l.Token)
	b = appendVarintField(b, lockRecLeaseMs, uint64(l.LeaseMS))
	b = appendStringField(b, lockRecOwner, l.Owner)
	b = appendVarintField(b, lockRecModIndex, l.ModIndex)
	b = appendVarintField(b, lockRecLockDelayMs, uint64(l.LockDelayMS))
	b = appendStringField(b, lockRecPrincipal, l.Principal)
	b = appendVarintField(b, lockRecMode, uint64(l.Mode))
	b = appendVarintField(b, lockRecLimit, uint64(l.Limit))
	b = appendVarintField(b, lockRecSession, l.Session)
	return b, nil
}

// varintFieldSize is the size of a varint field holding v (bytes), 0 for
// v == 0, which proto3 does not write. Every LockRecord tag is one byte.
func varintFieldSize(v uint64) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(v)
}

// stringFieldSize is the size of a string field holding s (bytes), 0 for "".
func stringFieldSize(s string) int {
	if s == "" {
		return 0
	}
	return 1 + protowire.SizeBytes(len(s))
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// nextLock reads one length-prefixed LockRecord into rec (every field set,
// the absent ones to zero). It accepts exactly the records appendLockRecord
// writes, as next does through protobuf: fields in ascending field-number
// order, each at most once and with its own wire type, no unknown field, no
// zero value written out, minimal varints (tags, lengths and values), a
// mode or limit within uint32, strings valid UTF-8. The strings of one
// record share one allocation (one per holder, not one per field).
func (sr *snapshotReader) nextLock(rec *corepb.LockRecord) error {
	raw, rest, err := sr.record()
	if err != nil {
		return err
	}
	if err := decodeLockRecord(raw, rec); err != nil {
		return fmt.Errorf("%w: snapshot record: %v", ErrDecode, err)
	}
	sr.rest = rest
	return nil
}

// decodeLockRecord is nextLock's check and decoding of one record's bytes.
func decodeLockRecord(raw []byte, rec *corepb.LockRecord) error {
	var strs string // raw as a string, made once the record has a string field
	str := func(from, to int) string {
		if strs == "" {
			strs = string(raw)
		}
		return strs[from:to]
	}
	*rec = corepb.LockRecord{}
	last := protowire.Number(0)
	for b := raw; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if n != protowire.SizeTag(num) {
			return fmt.Errorf("non-minimal tag of field %d", num)
		}
		if num <= last {
			return fmt.Errorf("field %d after field %d: not in canonical form", num, last)
		}
		last = num
		b = b[n:]
		switch num {
		case lockRecKey, lockRecOwner, lockRecPrincipal:
			if typ != protowire.BytesType {
				return fmt.Errorf("field %d has wire type %d", num, typ)
			}
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if n != protowire.SizeBytes(len(v)) {
				return fmt.Errorf("non-minimal length of field %d", num)
			}
			if len(v) == 0 {
				return fmt.Errorf("empty field %d written out: not in canonical form", num)
			}
			if !utf8.Valid(v) {
				return fmt.Errorf("field %d: string field contains invalid UTF-8", num)
			}
			end := len(raw) - len(b) + n // v is raw[end-len(v):end]
			switch s := str(end-len(v), end); num {
			case lockRecKey:
				rec.Key = s
			case lockRecOwner:
				rec.Owner = s
			default:
				rec.Principal = s
			}
			b = b[n:]
		case lockRecToken, lockRecLeaseMs, lockRecModIndex, lockRecLockDelayMs, lockRecMode, lockRecLimit, lockRecSession:
			if typ != protowire.VarintType {
				return fmt.Errorf("field %d has wire type %d", num, typ)
			}
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if n != protowire.SizeVarint(v) {
				return fmt.Errorf("non-minimal varint in field %d", num)
			}
			if v == 0 {
				return fmt.Errorf("zero field %d written out: not in canonical form", num)
			}
			switch num {
			case lockRecToken:
				rec.Token = v
			case lockRecLeaseMs:
				rec.LeaseMs = int64(v)
			case lockRecModIndex:
				rec.ModIndex = v
			case lockRecLockDelayMs:
				rec.LockDelayMs = int64(v)
			case lockRecSession:
				rec.Session = v
			default:
				if v > math.MaxUint32 {
					return fmt.Errorf("field %d: %d does not fit uint32: not in canonical form", num, v)
				}
				if num == lockRecMode {
					rec.Mode = uint32(v)
				} else {
					rec.Limit = uint32(v)
				}
			}
			b = b[n:]
		default:
			return fmt.Errorf("unknown field %d", num)
		}
	}
	return nil
}
