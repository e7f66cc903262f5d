package core

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"slices"

	"github.com/google/btree"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/core/internal/corepb"
)

// Snapshot format versions: the first byte of every snapshot (format below).
// WriteTo writes SnapshotVersion2 for a state that uses no mode, limit or
// session (so a node that knows only version 2 can still install it, as
// Encode keeps old commands in their old envelopes), and SnapshotVersion
// otherwise; Restore reads those two and SnapshotVersion1 and refuses any
// other. A change of format takes a new version.
const (
	// SnapshotVersion (3) is the newest format: version 2 plus each
	// holder's mode, limit and session, several holders per key (one record
	// each, in token order), and the session records (docs/design.md#sessions).
	SnapshotVersion byte = 3
	// SnapshotVersion2 is version 1 plus each
	// lock's mod_index, lock_delay_ms and principal, and the lock-delay
	// records; one holder per key. WriteTo still writes it for a state of
	// plain exclusive locks and no sessions, byte for byte as before.
	SnapshotVersion2 byte = 2
	// SnapshotVersion1 is the format before Renew, lock-delay and principals.
	// Restore still reads it, as an upgrade: every lock gets ModIndex 0 (so any
	// Expire of it applies, as before), no lock-delay and no principal, and
	// there are no lock-delay records.
	SnapshotVersion1 byte = 1
)

// Snapshot format (version 3), all of it covered by the trailing checksum:
//
//	version byte (SnapshotVersion)
//	varint-length-prefixed corepb.SnapshotHeader
//	lock_count       × varint-length-prefixed corepb.LockRecord, one per holder, ascending (key, token)
//	member_count     × varint-length-prefixed corepb.MemberRecord, ascending id
//	lock_delay_count × varint-length-prefixed corepb.LockDelayRecord, ascending key
//	session_count    × varint-length-prefixed corepb.SessionRecord, ascending id
//	4-byte big-endian CRC-32C of everything above
//
// All holders of a key carry the key's mode and limit; a holder's session is
// one of the session records. Version 2 is the same without session records,
// without the version 3 fields of SnapshotHeader and LockRecord (core/proto),
// and with one record per key; version 1 is version 2 without lock-delay
// records and the version 2 fields. Keys and ids are sorted and protobuf is
// marshalled deterministically, so two nodes at the same applied index write
// byte-identical snapshots.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot is a point-in-time, immutable copy of a StateMachine, cheap to take
// (the B-tree is cloned copy-on-write) and safe to write while Apply goes on,
// as hashicorp raft.FSMSnapshot.Persist requires.
type Snapshot struct {
	locks     *btree.BTreeG[holder]
	delays    *btree.BTreeG[LockDelay]
	sessions  *btree.BTreeG[Session]
	members   map[string]string
	extended  int
	keys      int
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
		locks: s.locks.Clone(), delays: s.delays.Clone(), sessions: s.sessions.Clone(), members: members,
		extended: s.extended, keys: s.keys, lastToken: s.lastToken, applied: s.applied,
	}
}

// AppliedIndex returns the log index the snapshot was taken at: a backend
// may compact its log up to it once the snapshot is durable.
func (sn *Snapshot) AppliedIndex() uint64 { return sn.applied }

// LastToken returns the last fencing token granted when the snapshot was
// taken.
func (sn *Snapshot) LastToken() uint64 { return sn.lastToken }

// Len returns the number of held keys in the snapshot (StateMachine.Len).
func (sn *Snapshot) Len() int { return sn.keys }

// WriteSnapshot writes a snapshot of the current state to w (see
// Snapshot.WriteTo). Errors are w's. Safe concurrently with Apply.
func (s *StateMachine) WriteSnapshot(w io.Writer) error {
	_, err := s.Snapshot().WriteTo(w)
	return err
}

// WriteTo writes the snapshot to w, in the SnapshotVersion format or, for a
// state without modes, limits or sessions, the SnapshotVersion2 format, and
// returns the number of bytes written. Two state machines at the same applied index write
// byte-identical snapshots. Errors are w's. It only reads the snapshot, so it
// may run concurrently with Apply on the state machine it came from and with
// other WriteTo calls (hashicorp raft.FSMSnapshot.Persist).
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	cw := &checksumWriter{w: bufio.NewWriterSize(w, 64<<10)}
	version := SnapshotVersion2
	if sn.extended > 0 || sn.sessions.Len() > 0 {
		version = SnapshotVersion
	}
	cw.write([]byte{version})
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
		SessionCount:   uint64(sn.sessions.Len()),
	})
	sn.locks.Ascend(func(h holder) bool {
		l := h.lock()
		cw.lockRecord(&l)
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
	var srec corepb.SessionRecord
	sn.sessions.Ascend(func(se Session) bool {
		srec.Id, srec.TtlMs, srec.ModIndex, srec.Principal = se.ID, se.TTLMS, se.ModIndex, se.Principal
		cw.record(&srec)
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

// lockRecord writes l as a LockRecord (appendLockRecord: no protobuf
// marshaller per holder).
func (c *checksumWriter) lockRecord(l *Lock) {
	var err error
	c.buf, err = appendLockRecord(c.buf[:0], l)
	if err != nil && c.err == nil {
		c.err = err
	}
	c.write(c.buf)
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
// SnapshotVersion or SnapshotVersion2 format or, as an upgrade,
// SnapshotVersion1 (see there). The snapshot is read and verified completely
// before anything changes: on error s is unchanged. Errors wrap ErrDecode
// (unknown version, checksum mismatch, truncated or trailing bytes, records
// out of order or not in the exact form WriteTo produces (a snapshot with
// fields or records of a later version than its own, or a version 3 snapshot
// of a state version 2 can hold, too), a lock token of 0 or above last_token,
// a lock or lock-delay index above applied_index, a lock-delay of 0 ms or on
// a held key, holders of one key with different modes or limits or more than
// the key admits, a holder under a session that is not in the snapshot or of
// another principal, a session id or index above applied_index) or wrap r's
// error. Restore accepts exactly what WriteTo of some state writes, so a
// state machine restored from a SnapshotVersion or SnapshotVersion2 snapshot
// writes the same bytes back, and one restored from a version 1 snapshot
// writes the version 2 form of that state (FuzzRestore). Like Apply, it must be called from the apply
// goroutine.
func (s *StateMachine) Restore(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("snapshot: read: %w", err)
	}
	st, err := decodeSnapshot(data, true)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.locks, s.delays, s.members, s.lastToken, s.applied = st.locks, st.delays, st.members, st.lastToken, st.applied
	s.sessions, s.sessLocks, s.keys, s.extended = st.sessions, st.sessLocks, st.keys, st.extended
	s.byPrincipal, s.holdersBy = st.byPrincipal, st.holdersBy
	s.restores++
	return nil
}

// SnapshotSummary describes a snapshot CheckSnapshot accepted.
type SnapshotSummary struct {
	// AppliedIndex is the log index the snapshot was taken at.
	AppliedIndex uint64
	// LastToken is the last fencing token granted when it was taken.
	LastToken uint64
	// Keys is the number of held keys (StateMachine.Len after a Restore).
	Keys int
}

// CheckSnapshot verifies data, snapshot bytes, exactly as Restore does
// (it accepts what Restore accepts and refuses the rest with the same
// errors, wrapping ErrDecode) without building the lock table: for a
// reader of the bytes that keeps no table (a backup's checksum check,
// `ticketctl snapshot save`), it costs a pass over the records instead of a
// B-tree insert per holder.
func CheckSnapshot(data []byte) (SnapshotSummary, error) {
	st, err := decodeSnapshot(data, false)
	if err != nil {
		return SnapshotSummary{}, err
	}
	return SnapshotSummary{AppliedIndex: st.applied, LastToken: st.lastToken, Keys: st.keys}, nil
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
	raw, rest, err := sr.record()
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(raw, m); err != nil {
		return fmt.Errorf("%w: snapshot record: %v", ErrDecode, err)
	}
	if len(m.ProtoReflect().GetUnknown()) != 0 {
		return fmt.Errorf("%w: snapshot record with unknown fields", ErrDecode)
	}
	if sr.canon, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(sr.canon[:0], m); err != nil || !bytes.Equal(sr.canon, raw) {
		return fmt.Errorf("%w: snapshot record not in canonical form", ErrDecode)
	}
	sr.rest = rest
	return nil
}

// record splits the next length-prefixed record off the unread bytes: its
// bytes and what follows it. The length must be a minimal varint and the
// record whole (errors wrap ErrDecode).
func (sr *snapshotReader) record() (raw, rest []byte, err error) {
	size, n := protowire.ConsumeVarint(sr.rest)
	if n < 0 || uint64(len(sr.rest)-n) < size {
		return nil, nil, fmt.Errorf("%w: truncated snapshot record", ErrDecode)
	}
	if n != protowire.SizeVarint(size) {
		return nil, nil, fmt.Errorf("%w: non-minimal snapshot record length", ErrDecode)
	}
	return sr.rest[n : n+int(size)], sr.rest[n+int(size):], nil
}

// decodedSnapshot is the state a snapshot holds, verified. A snapshot
// only checked (decodeSnapshot without build) has no tables: its locks,
// delays, sessions and sessLocks are empty.
type decodedSnapshot struct {
	build     bool
	locks     *btree.BTreeG[holder]
	delays    *btree.BTreeG[LockDelay]
	sessions  *btree.BTreeG[Session]
	sessLocks *btree.BTreeG[sessionLock]
	// heldKeys are the held keys in ascending order, kept instead of locks
	// when the snapshot is only checked (for held).
	heldKeys []string
	// sessionHolders names, per session some holder is under, that
	// holder's principal (all holders of a session must share it) and the
	// holder, until readSessions finds the session's record.
	sessionHolders map[uint64]sessionHolder
	// byPrincipal counts the sessions by principal (derived, as sessLocks).
	byPrincipal map[string]int
	// holdersBy counts the holders by principal (derived, as sessLocks).
	holdersBy map[string]int
	members   map[string]string
	keys      int
	extended  int
	lastToken uint64
	applied   uint64
}

// sessionHolder is a holder under a session, as decodedSnapshot keeps it
// to check the session's record.
type sessionHolder struct {
	principal, key string
	token          uint64
}

// decodeSnapshot verifies data and, with build, returns the state it holds;
// without build, only the header's figures and the counts (CheckSnapshot).
func decodeSnapshot(data []byte, build bool) (*decodedSnapshot, error) {
	if len(data) < 5 {
		return nil, fmt.Errorf("%w: snapshot of %d bytes is too short", ErrDecode, len(data))
	}
	version := data[0]
	if version != SnapshotVersion && version != SnapshotVersion2 && version != SnapshotVersion1 {
		return nil, fmt.Errorf("%w: unknown snapshot version %d", ErrDecode, version)
	}
	v1, v3 := version == SnapshotVersion1, version == SnapshotVersion
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
	if !v3 && hdr.GetSessionCount() != 0 {
		return nil, fmt.Errorf("%w: version %d snapshot with session records", ErrDecode, version)
	}
	st := &decodedSnapshot{
		build:          build,
		locks:          newLockTree(),
		delays:         btree.NewG(btreeDegree, delayLess),
		sessions:       btree.NewG(btreeDegree, sessionLess),
		sessLocks:      btree.NewG(btreeDegree, sessionLockLess),
		byPrincipal:    map[string]int{},
		holdersBy:      map[string]int{},
		sessionHolders: map[uint64]sessionHolder{},
		lastToken:      hdr.GetLastToken(),
		applied:        hdr.GetAppliedIndex(),
	}
	if err := st.readLocks(sr, &hdr, version); err != nil {
		return nil, err
	}
	// Every record takes at least one byte: a count beyond that is corrupt and
	// must not size an allocation.
	if hdr.GetMemberCount() > uint64(len(sr.rest)) {
		return nil, fmt.Errorf("%w: snapshot claims %d members in %d bytes", ErrDecode, hdr.GetMemberCount(), len(sr.rest))
	}
	st.members = make(map[string]string, hdr.GetMemberCount())
	var m corepb.MemberRecord
	prev := ""
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
		if st.held(d.GetKey()) {
			return nil, fmt.Errorf("%w: snapshot key %q is both held and delayed", ErrDecode, d.GetKey())
		}
		if st.build {
			st.delays.ReplaceOrInsert(LockDelay{Key: d.GetKey(), LockDelayMS: d.GetLockDelayMs(), Index: d.GetIndex()})
		}
	}
	if err := st.readSessions(sr, &hdr); err != nil {
		return nil, err
	}
	if len(sr.rest) != 0 {
		return nil, fmt.Errorf("%w: %d trailing snapshot bytes", ErrDecode, len(sr.rest))
	}
	if v3 != (st.extended > 0 || hdr.GetSessionCount() > 0) {
		// WriteTo writes version 3 exactly when the state has a mode, limit or session.
		return nil, fmt.Errorf("%w: version %d snapshot is not the form WriteTo gives its state", ErrDecode, version)
	}
	return st, nil
}

// held reports whether key has a holder in the decoded lock table.
func (st *decodedSnapshot) held(key string) bool {
	if !st.build {
		_, found := slices.BinarySearch(st.heldKeys, key)
		return found
	}
	found := false
	st.locks.AscendGreaterOrEqual(holderKey(key), func(h holder) bool {
		found = h.key == key
		return false
	})
	return found
}

// readLocks reads the header's lock_count holder records, checking their
// order and that the holders of each key agree on its mode and limit and do
// not exceed it.
func (st *decodedSnapshot) readLocks(sr *snapshotReader, hdr *corepb.SnapshotHeader, version byte) error {
	var rec corepb.LockRecord
	var prev Lock
	holders := 0
	for i := uint64(0); i < hdr.GetLockCount(); i++ {
		if err := sr.nextLock(&rec); err != nil {
			return err
		}
		l := Lock{
			Key: rec.GetKey(), Token: rec.GetToken(), LeaseMS: rec.GetLeaseMs(), Owner: rec.GetOwner(),
			ModIndex: rec.GetModIndex(), LockDelayMS: rec.GetLockDelayMs(), Principal: rec.GetPrincipal(),
			Mode: Mode(rec.GetMode()), Limit: rec.GetLimit(), Session: rec.GetSession(),
		}
		sameKey := i > 0 && l.Key == prev.Key
		switch {
		case i > 0 && (l.Key < prev.Key || (sameKey && l.Token <= prev.Token)):
			return fmt.Errorf("%w: snapshot keys out of order at %q token %d", ErrDecode, l.Key, l.Token)
		case l.Token == 0 || l.Token > st.lastToken:
			return fmt.Errorf("%w: snapshot lock %q has token %d, last_token is %d", ErrDecode, l.Key, l.Token, st.lastToken)
		case version == SnapshotVersion1 && (l.ModIndex != 0 || l.LockDelayMS != 0 || l.Principal != ""):
			return fmt.Errorf("%w: version 1 snapshot lock %q with version 2 fields", ErrDecode, l.Key)
		case version != SnapshotVersion && needsV3(l):
			return fmt.Errorf("%w: version %d snapshot lock %q with version 3 fields", ErrDecode, version, l.Key)
		case l.ModIndex > st.applied:
			return fmt.Errorf("%w: snapshot lock %q changed at index %d, applied_index is %d", ErrDecode, l.Key, l.ModIndex, st.applied)
		case l.Mode > ModeShared || (l.Mode == ModeShared && l.Limit != 0):
			return fmt.Errorf("%w: snapshot lock %q has mode %v with limit %d", ErrDecode, l.Key, l.Mode, l.Limit)
		case sameKey && (l.Mode != prev.Mode || l.Limit != prev.Limit):
			return fmt.Errorf("%w: snapshot holders of %q disagree on mode or limit", ErrDecode, l.Key)
		}
		if sameKey {
			holders++
		} else {
			holders = 1
			st.keys++
			if !st.build {
				st.heldKeys = append(st.heldKeys, l.Key)
			}
		}
		if (l.Limit > 0 && holders > int(l.Limit)) || (l.Limit == 0 && l.Mode == ModeExclusive && holders > 1) {
			return fmt.Errorf("%w: snapshot key %q has more holders than it admits", ErrDecode, l.Key)
		}
		if needsV3(l) {
			st.extended++
		}
		if l.Session != 0 {
			if h, ok := st.sessionHolders[l.Session]; !ok {
				st.sessionHolders[l.Session] = sessionHolder{principal: l.Principal, key: l.Key, token: l.Token}
			} else if h.principal != l.Principal {
				// They cannot both be of the session's principal.
				return fmt.Errorf("%w: snapshot locks %q token %d and %q token %d under session %d are of different principals",
					ErrDecode, h.key, h.token, l.Key, l.Token, l.Session)
			}
			if st.build {
				st.sessLocks.ReplaceOrInsert(sessionLock{session: l.Session, key: l.Key, token: l.Token})
			}
		}
		if st.build {
			st.locks.ReplaceOrInsert(holderOf(l))
		}
		st.holdersBy[l.Principal]++
		prev = l
	}
	return nil
}

// readSessions reads the header's session_count session records, then
// checks that every holder's session is one of them, of its principal.
func (st *decodedSnapshot) readSessions(sr *snapshotReader, hdr *corepb.SnapshotHeader) error {
	if hdr.GetSessionCount() > uint64(len(sr.rest)) {
		return fmt.Errorf("%w: snapshot claims %d sessions in %d bytes", ErrDecode, hdr.GetSessionCount(), len(sr.rest))
	}
	var rec corepb.SessionRecord
	var prev uint64
	for i := uint64(0); i < hdr.GetSessionCount(); i++ {
		if err := sr.next(&rec); err != nil {
			return err
		}
		se := Session{ID: rec.GetId(), TTLMS: rec.GetTtlMs(), ModIndex: rec.GetModIndex(), Principal: rec.GetPrincipal()}
		switch {
		case se.ID <= prev:
			return fmt.Errorf("%w: snapshot session ids out of order at %d", ErrDecode, se.ID)
		case se.ID > st.applied || se.ModIndex < se.ID || se.ModIndex > st.applied:
			return fmt.Errorf("%w: snapshot session %d changed at index %d, applied_index is %d", ErrDecode, se.ID, se.ModIndex, st.applied)
		}
		prev = se.ID
		if h, ok := st.sessionHolders[se.ID]; ok {
			if h.principal != se.Principal {
				return fmt.Errorf("%w: snapshot lock %q token %d under session %d of another principal", ErrDecode, h.key, h.token, se.ID)
			}
			delete(st.sessionHolders, se.ID)
		}
		if st.build {
			st.sessions.ReplaceOrInsert(se)
		}
		st.byPrincipal[se.Principal]++
	}
	if len(st.sessionHolders) > 0 {
		// Name the holder of the lowest such session, so the error is the
		// same on every run.
		id := slices.Min(slices.Collect(maps.Keys(st.sessionHolders)))
		h := st.sessionHolders[id]
		return fmt.Errorf("%w: snapshot lock %q token %d under unknown session %d", ErrDecode, h.key, h.token, id)
	}
	return nil
}

// RebaseSnapshot returns the snapshot that a state machine restored from
// data and then moved to applied (Skip) writes, having verified data as
// Restore does (errors wrap ErrDecode). A version 2 or 3 snapshot is
// already in the form WriteTo writes (Restore accepts nothing else), so
// only its header's applied_index and its checksum change: no table is
// built, which is what lets `ticketd restore` of a million locks write a
// new member's snapshot in a pass over the bytes. A version 1 snapshot is
// restored and written back (the upgrade to version 2). An applied at or
// below the snapshot's own leaves it unchanged, as Skip does.
func RebaseSnapshot(data []byte, applied uint64) ([]byte, error) {
	st, err := decodeSnapshot(data, false)
	if err != nil {
		return nil, err
	}
	if data[0] == SnapshotVersion1 {
		sm := NewStateMachine()
		if err := sm.Restore(bytes.NewReader(data)); err != nil {
			return nil, err
		}
		sm.Skip(applied)
		var buf bytes.Buffer
		if _, err := sm.Snapshot().WriteTo(&buf); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	sr := &snapshotReader{rest: data[1 : len(data)-4]}
	var hdr corepb.SnapshotHeader
	if err := sr.next(&hdr); err != nil {
		return nil, err // decodeSnapshot read it already
	}
	hdr.AppliedIndex = max(applied, st.applied)
	hb, err := proto.MarshalOptions{Deterministic: true}.Marshal(&hdr)
	if err != nil {
		return nil, fmt.Errorf("snapshot: marshal: %w", err)
	}
	out := make([]byte, 0, 1+protowire.SizeBytes(len(hb))+len(sr.rest)+4)
	out = append(out, data[0])
	out = protowire.AppendBytes(out, hb)
	out = append(out, sr.rest...)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, castagnoli)), nil
}
