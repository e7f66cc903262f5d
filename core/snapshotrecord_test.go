package core

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/ticketd/ticketd/core/internal/corepb"
)

// protoLockRecord is the reference the hand-written codec must match: the
// length-prefixed deterministic protobuf marshalling of l's LockRecord.
func protoLockRecord(l Lock) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&corepb.LockRecord{
		Key: l.Key, Token: l.Token, LeaseMs: l.LeaseMS, Owner: l.Owner, ModIndex: l.ModIndex,
		LockDelayMs: l.LockDelayMS, Principal: l.Principal, Mode: uint32(l.Mode), Limit: l.Limit, Session: l.Session,
	})
	if err != nil {
		return nil, err
	}
	return append(protowire.AppendVarint(nil, uint64(len(b))), b...), nil
}

// protoDecodeLockRecord is the reference decoder: what the generic
// snapshotReader.next accepts (unmarshal, no unknown fields, canonical).
func protoDecodeLockRecord(raw []byte) (*corepb.LockRecord, bool) {
	var rec corepb.LockRecord
	if proto.Unmarshal(raw, &rec) != nil || len(rec.ProtoReflect().GetUnknown()) != 0 {
		return nil, false
	}
	canon, err := proto.MarshalOptions{Deterministic: true}.Marshal(&rec)
	return &rec, err == nil && bytes.Equal(canon, raw)
}

// TestLockRecordCodec checks that appendLockRecord writes the bytes
// protobuf's deterministic marshalling writes, for any lock (zero fields,
// negative leases, the largest values, any strings), and that nextLock
// reads them back to the same record.
func TestLockRecordCodec(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		str := rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringN(0, 300, -1))
		u64 := rapid.OneOf(rapid.Just(uint64(0)), rapid.Uint64(), rapid.Uint64Range(0, 300))
		i64 := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64())
		l := Lock{
			Key: str.Draw(t, "key"), Token: u64.Draw(t, "token"), LeaseMS: i64.Draw(t, "lease"),
			Owner: str.Draw(t, "owner"), ModIndex: u64.Draw(t, "mod"), LockDelayMS: i64.Draw(t, "delay"),
			Principal: str.Draw(t, "principal"), Mode: Mode(rapid.Uint8().Draw(t, "mode")),
			Limit: rapid.Uint32().Draw(t, "limit"), Session: u64.Draw(t, "session"),
		}
		want, err := protoLockRecord(l)
		if err != nil {
			t.Fatalf("protobuf refuses %+v: %v", l, err)
		}
		got, err := appendLockRecord([]byte{0xAA}, &l)
		if err != nil {
			t.Fatalf("appendLockRecord(%+v): %v", l, err)
		}
		if !bytes.Equal(got[1:], want) || got[0] != 0xAA {
			t.Fatalf("appendLockRecord(%+v) = %x, protobuf writes %x", l, got[1:], want)
		}
		sr := &snapshotReader{rest: append(got[1:], 0x07)}
		var rec corepb.LockRecord
		if err := sr.nextLock(&rec); err != nil {
			t.Fatalf("nextLock(%x): %v", got[1:], err)
		}
		_, n := protowire.ConsumeVarint(want)
		ref, ok := protoDecodeLockRecord(want[n:])
		if !ok || !proto.Equal(&rec, ref) {
			t.Fatalf("nextLock read %v, protobuf reads %v", &rec, ref)
		}
		if !bytes.Equal(sr.rest, []byte{0x07}) {
			t.Fatalf("nextLock left %x, want the next record's byte", sr.rest)
		}
	})
}

// TestLockRecordInvalidUTF8 checks that a lock whose strings are not UTF-8
// is refused by the codec as by protobuf.
func TestLockRecordInvalidUTF8(t *testing.T) {
	for _, l := range []Lock{{Key: "a\xff", Token: 1}, {Key: "a", Owner: "\xc3"}, {Key: "a", Principal: "\x80"}} {
		if _, err := protoLockRecord(l); err == nil {
			t.Fatalf("protobuf marshals %+v", l)
		}
		if _, err := appendLockRecord(nil, &l); err == nil {
			t.Fatalf("appendLockRecord marshals %+v", l)
		}
	}
}

// FuzzLockRecordDecode checks that decodeLockRecord accepts exactly the
// record bytes protobuf's unmarshal plus the canonical-form check accept,
// and reads the same record from them. The seeds (valid records, and
// records with a field reordered, repeated, zero, overlong, of the wrong
// wire type, unknown or not UTF-8) run with the normal tests; fuzz with
//
//	go test -run='^$' -fuzz=FuzzLockRecordDecode -fuzztime=30s ./core/
func FuzzLockRecordDecode(f *testing.F) {
	valid := func(l Lock) []byte {
		b, err := protoLockRecord(l)
		if err != nil {
			f.Fatal(err)
		}
		_, n := protowire.ConsumeVarint(b)
		return b[n:]
	}
	full := valid(Lock{Key: "scale/lock/1", Token: 7, LeaseMS: -5, Owner: "o", ModIndex: 3, LockDelayMS: 9,
		Principal: "svc", Mode: ModeShared, Limit: 4, Session: 11})
	f.Add(full)
	f.Add(valid(Lock{Key: "k", Token: 1, LeaseMS: 1000, Owner: "owner"}))
	f.Add([]byte{})
	f.Add(append(bytes.Clone(full), 0x10, 0x01))                                    // field 2 again
	f.Add(append([]byte{0x10, 0x01}, full...))                                      // field 2 before field 1
	f.Add([]byte{0x10, 0x00})                                                       // token 0 written out
	f.Add([]byte{0x10, 0x81, 0x00})                                                 // token 1, overlong
	f.Add([]byte{0x0a, 0x00})                                                       // empty key written out
	f.Add([]byte{0x0a, 0x81, 0x00, 0x61})                                           // key length overlong
	f.Add([]byte{0x08, 0x01})                                                       // key with a varint wire type
	f.Add([]byte{0x58, 0x01})                                                       // field 11
	f.Add([]byte{0x0a, 0x01, 0xff})                                                 // key not UTF-8
	f.Add([]byte{0x40, 0x80, 0x80, 0x80, 0x80, 0x10})                               // mode above uint32
	f.Add([]byte{0x90, 0x00, 0x01})                                                 // tag of field 2, overlong
	f.Add([]byte{0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}) // lease -1
	f.Fuzz(func(t *testing.T, raw []byte) {
		var rec corepb.LockRecord
		err := decodeLockRecord(raw, &rec)
		ref, ok := protoDecodeLockRecord(raw)
		switch {
		case ok && err != nil:
			t.Fatalf("decodeLockRecord refuses %x (%v); protobuf reads %v in canonical form", raw, err, ref)
		case !ok && err == nil:
			t.Fatalf("decodeLockRecord accepts %x as %v; protobuf refuses it or it is not canonical", raw, &rec)
		case ok && !proto.Equal(&rec, ref):
			t.Fatalf("decodeLockRecord reads %x as %v, protobuf as %v", raw, &rec, ref)
		}
	})
}
