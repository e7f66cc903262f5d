package core

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/google/btree"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/core/internal/corepb"
)

// Snapshot format versions: the first byte of every snapshot (format below).
// WriteTo writes SnapshotVersion; Restore reads it and SnapshotVersion1 and
// refuses any other. A change of format takes a new version.
const (
	// SnapshotVersion (2) is the version WriteTo writes: version 1 plus each
	// lock's mod_index, lock_delay_ms and principal, and the lock-delay records.
	SnapshotVersion byte = 2
	// SnapshotVersion1 is the format before Renew, lock-delay and principals.
	// Restore still reads it, as an upgrade: every lock gets ModIndex 0 (so any
	// Expire of it applies, as before), no lock-delay and no principal, and
	// there are no lock-delay records.
	SnapshotVersion1 byte = 1
)

// Snapshot format (version 2), all of it covered by the trailing checksum:
//
//	version byte (SnapshotVersion)
//	varint-length-prefixed corepb.SnapshotHeader
//	lock_count       × varint-length-prefixed corepb.LockRecord, ascending key
//	member_count     × varint-length-prefixed corepb.MemberRecord, ascending id
//	lock_delay_count × varint-length-prefixed corepb.LockDelayRecord, ascending key
//	4-byte big-endian CRC-32C of everything above
//
// Version 1 is the same without lock-delay records and without the version 2
// fields of SnapshotHeader and LockRecord (core/proto). Keys and ids are
// sorted and protobuf is marshalled deterministically, so two nodes at the
// same applied index write byte-identical snapshots.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot is a point-in-time, immutable copy of a StateMachine, cheap to take
// (the B-tree is cloned copy-on-write) and safe to write while Apply goes on,
// as hashicorp raft.FSMSnapshot.Persist requires.
type Snapshot struct {
	locks     *btree.BTreeG[Lock]
	delays    *btree.BTreeG[LockDelay]
	members   map[string]string
	lastToken uint64
	applied   uint64
}

// Snapshot returns a point-in-time copy of s in O(1) (plus a copy of the small
// member directory). Safe concurrently with Apply; Apply after it pays for
// the copy-on-write of the B-tree nodes it touches.
func (s *StateMachine) Snapshot() *Snapshot {
	s.mu.Lock() // Clone marks the tree copy-on-write: a write to s.locks.
	defer s.mu.Unlock()
	members := make(map[string]string, len(s.members))
	for id, addr := range s.members {
		members[id] = addr
	}
	return &Snapshot{
		locks: s.locks.Clone(), delays: s.delays.Clone(), members: members,
		lastToken: s.lastToken, applied: s.applied,
	}
}

// AppliedIndex returns the log index the snapshot was taken at: a backend
// may compact its log up to it once the snapshot is durable.
func (sn *Snapshot) AppliedIndex() uint64 { return sn.applied }

// WriteSnapshot writes a snapshot of the current state to w (see
// Snapshot.WriteTo). Errors are w's. Safe concurrently with Apply.
func (s *StateMachine) WriteSnapshot(w io.Writer) error {
	_, err := s.Snapshot().WriteTo(w)
	return err
}

// WriteTo writes the snapshot in the SnapshotVersion format to w and returns the
// number of bytes written. Two state machines at the same applied index write
// byte-identical snapshots. Errors are w's. It only reads the snapshot, so it
// may run concurrently with Apply on the state machine it came from and with
// other WriteTo calls (hashicorp raft.FSMSnapshot.Persist).
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	cw := &checksumWriter{w: bufio.NewWriterSize(w, 64<<10)}
	cw.write([]byte{SnapshotVersion})
	ids := make([]string, 0, len(sn.members))
	for id := range sn.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	cw.record(&corepb.SnapshotHeader{
		AppliedIndex:   sn.applied,
		LastToken:      sn.lastToken,
		LockCount:      uint64(sn.locks.Len()),
		MemberCount:    uint64(len(ids)),
		LockDelayCount: uint64(sn.delays.Len()),
	})
	var rec corepb.LockRecord
	sn.locks.Ascend(func(l Lock) bool {
		rec.Key, rec.Token, rec.LeaseMs, rec.Owner = l.Key, l.Token, l.LeaseMS, l.Owner
		rec.ModIndex, rec.LockDelayMs, rec.Principal = l.ModIndex, l.LockDelayMS, l.Principal
		cw.record(&rec)
		return cw.err == nil
	})
	for _, id := range ids {
		cw.record(&corepb.MemberRecord{Id: id, ApiAddr: sn.members[id]})
	}
	var drec corepb.LockDelayRecord
	sn.delays.Ascend(func(d LockDelay) bool {
		drec.Key, drec.LockDelayMs, drec.Index = d.Key, d.LockDelayMS, d.Index
		cw.record(&drec)
		return cw.err == nil
	})
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], cw.crc)
	cw.write(sum[:])
	if cw.err == nil {
		cw.err = cw.w.Flush()
	}
	return cw.n, cw.err
}

type checksumWriter struct {
	w   *bufio.Writer
	crc uint32
	n   int64
	err error
	buf []byte
}

func (c *checksumWriter) write(p []byte) {
	if c.err != nil {
		return
	}
	c.crc = crc32.Update(c.crc, castagnoli, p)
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
}

func (c *checksumWriter) record(m proto.Message) {
	c.buf = protowire.AppendVarint(c.buf[:0], uint64(proto.Size(m)))
	var err error
	c.buf, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(c.buf, m)
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("snapshot: marshal: %w", err)
	}
	c.write(c.buf)
}

// Restore replaces the whole state of s with the snapshot read from r, in the
// SnapshotVersion format or, as an upgrade, SnapshotVersion1 (see there). The
// snapshot is read and verified completely before anything changes: on error
// s is unchanged. Errors wrap ErrDecode (unknown version, checksum mismatch,
// truncated or trailing bytes, records out of order or not in the exact form
// WriteTo produces (a version 1 snapshot with version 2 fields, too), a lock
// token of 0 or above last_token, a lock or lock-delay index above
// applied_index, a lock-delay of 0 ms or on a held key) or wrap r's error.
// Restore accepts exactly what WriteTo of some state writes, so a state
// machine restored from a SnapshotVersion snapshot writes the same bytes back,
// and one restored from a version 1 snapshot writes the version 2 form of
// that state (FuzzRestore). Like Apply, it must be called from the apply
// goroutine.
func (s *StateMachine) Restore(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("snapshot: read: %w", err)
	}
	st, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.locks, s.delays, s.members, s.lastToken, s.applied = st.locks, st.delays, st.members, st.lastToken, st.applied
	return nil
}

// snapshotReader reads the length-prefixed records of a snapshot body.
type snapshotReader struct {
	rest  []byte
	canon []byte
}

// next reads one length-prefixed record into m. A record must be in the exact
// form WriteTo produces (minimal length varint, no unknown fields, the
// deterministic marshalling of what it decodes to), so that anything Restore
// accepts is written back byte for byte.
func (sr *snapshotReader) next(m proto.Message) error {
	size, n := protowire.ConsumeVarint(sr.rest)
	if n < 0 || uint64(len(sr.rest)-n) < size {
		return fmt.Errorf("%w: truncated snapshot record", ErrDecode)
	}
	if n != protowire.SizeVarint(size) {
		return fmt.Errorf("%w: non-minimal snapshot record length", ErrDecode)
	}
	raw := sr.rest[n : n+int(size)]
	if err := proto.Unmarshal(raw, m); err != nil {
		return fmt.Errorf("%w: snapshot record: %v", ErrDecode, err)
	}
	if len(m.ProtoReflect().GetUnknown()) != 0 {
		return fmt.Errorf("%w: snapshot record with unknown fields", ErrDecode)
	}
	var err error
	if sr.canon, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(sr.canon[:0], m); err != nil || !bytes.Equal(sr.canon, raw) {
		return fmt.Errorf("%w: snapshot record not in canonical form", ErrDecode)
	}
	sr.rest = sr.rest[n+int(size):]
	return nil
}

// decodedSnapshot is the state a snapshot holds, verified.
type decodedSnapshot struct {
	locks     *btree.BTreeG[Lock]
	delays    *btree.BTreeG[LockDelay]
	members   map[string]string
	lastToken uint64
	applied   uint64
}

func decodeSnapshot(data []byte) (*decodedSnapshot, error) {
	if len(data) < 5 {
		return nil, fmt.Errorf("%w: snapshot of %d bytes is too short", ErrDecode, len(data))
	}
	version := data[0]
	if version != SnapshotVersion && version != SnapshotVersion1 {
		return nil, fmt.Errorf("%w: unknown snapshot version %d", ErrDecode, version)
	}
	v1 := version == SnapshotVersion1
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, fmt.Errorf("%w: snapshot checksum %08x, want %08x", ErrDecode, got, sum)
	}
	sr := &snapshotReader{rest: body[1:]}
	var hdr corepb.SnapshotHeader
	if err := sr.next(&hdr); err != nil {
		return nil, err
	}
	if v1 && hdr.GetLockDelayCount() != 0 {
		return nil, fmt.Errorf("%w: version 1 snapshot with lock-delay records", ErrDecode)
	}
	st := &decodedSnapshot{
		locks:     btree.NewG(btreeDegree, lockLess),
		delays:    btree.NewG(btreeDegree, delayLess),
		lastToken: hdr.GetLastToken(),
		applied:   hdr.GetAppliedIndex(),
	}
	var rec corepb.LockRecord
	prev := ""
	for i := uint64(0); i < hdr.GetLockCount(); i++ {
		if err := sr.next(&rec); err != nil {
			return nil, err
		}
		if i > 0 && rec.GetKey() <= prev {
			return nil, fmt.Errorf("%w: snapshot keys out of order at %q", ErrDecode, rec.GetKey())
		}
		prev = rec.GetKey()
		if rec.GetToken() == 0 || rec.GetToken() > st.lastToken {
			return nil, fmt.Errorf("%w: snapshot lock %q has token %d, last_token is %d", ErrDecode, rec.GetKey(), rec.GetToken(), st.lastToken)
		}
		if v1 && (rec.GetModIndex() != 0 || rec.GetLockDelayMs() != 0 || rec.GetPrincipal() != "") {
			return nil, fmt.Errorf("%w: version 1 snapshot lock %q with version 2 fields", ErrDecode, rec.GetKey())
		}
		if rec.GetModIndex() > st.applied {
			return nil, fmt.Errorf("%w: snapshot lock %q changed at index %d, applied_index is %d", ErrDecode, rec.GetKey(), rec.GetModIndex(), st.applied)
		}
		st.locks.ReplaceOrInsert(Lock{
			Key: rec.GetKey(), Token: rec.GetToken(), LeaseMS: rec.GetLeaseMs(), Owner: rec.GetOwner(),
			ModIndex: rec.GetModIndex(), LockDelayMS: rec.GetLockDelayMs(), Principal: rec.GetPrincipal(),
		})
	}
	// Every record takes at least one byte: a count beyond that is corrupt and
	// must not size an allocation.
	if hdr.GetMemberCount() > uint64(len(sr.rest)) {
		return nil, fmt.Errorf("%w: snapshot claims %d members in %d bytes", ErrDecode, hdr.GetMemberCount(), len(sr.rest))
	}
	st.members = make(map[string]string, hdr.GetMemberCount())
	var m corepb.MemberRecord
	for i := uint64(0); i < hdr.GetMemberCount(); i++ {
		if err := sr.next(&m); err != nil {
			return nil, err
		}
		if i > 0 && m.GetId() <= prev {
			return nil, fmt.Errorf("%w: snapshot member ids out of order at %q", ErrDecode, m.GetId())
		}
		prev = m.GetId()
		st.members[m.GetId()] = m.GetApiAddr()
	}
	var d corepb.LockDelayRecord
	for i := uint64(0); i < hdr.GetLockDelayCount(); i++ {
		if err := sr.next(&d); err != nil {
			return nil, err
		}
		if i > 0 && d.GetKey() <= prev {
			return nil, fmt.Errorf("%w: snapshot lock-delay keys out of order at %q", ErrDecode, d.GetKey())
		}
		prev = d.GetKey()
		switch {
		case d.GetLockDelayMs() <= 0:
			return nil, fmt.Errorf("%w: snapshot lock-delay of %q is %d ms", ErrDecode, d.GetKey(), d.GetLockDelayMs())
		case d.GetIndex() == 0 || d.GetIndex() > st.applied:
			return nil, fmt.Errorf("%w: snapshot lock-delay of %q at index %d, applied_index is %d", ErrDecode, d.GetKey(), d.GetIndex(), st.applied)
		}
		if _, held := st.locks.Get(Lock{Key: d.GetKey()}); held {
			return nil, fmt.Errorf("%w: snapshot key %q is both held and delayed", ErrDecode, d.GetKey())
		}
		st.delays.ReplaceOrInsert(LockDelay{Key: d.GetKey(), LockDelayMS: d.GetLockDelayMs(), Index: d.GetIndex()})
	}
	if len(sr.rest) != 0 {
		return nil, fmt.Errorf("%w: %d trailing snapshot bytes", ErrDecode, len(sr.rest))
	}
	return st, nil
}
