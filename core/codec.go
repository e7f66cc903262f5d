package core

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/core/internal/corepb"
)

// Envelope version bytes, written in front of every encoded Command. A node
// that reads any other version stops (ErrDecode) rather than guess: skipping
// an entry would fork the state.
const (
	// CommandVersion (1) is the original envelope: Grant{key, lease_ms,
	// owner}, Release, Expire{key, token} (unconditional), Noop, SetMember.
	// Encode still writes it for every command that uses nothing newer, so
	// those entries are byte-identical to the ones older nodes wrote, and
	// Decode reads it exactly as they did (fields added since are ignored).
	CommandVersion byte = 1
	// CommandVersion2 adds Renew, Expire.seen_index, Grant.lock_delay_ms and
	// Grant.principal. Encode writes it only for a command that uses one of
	// them, so that a node too old to know them stops on the entry
	// (unknown version) instead of applying it differently and forking.
	CommandVersion2 byte = 2
	// CommandVersion3 adds Grant.mode, Grant.limit and Grant.session and the
	// session commands (docs/design.md#sessions), under the same rule: Encode writes it
	// only for a command that uses one of them.
	CommandVersion3 byte = 3
	// CommandVersion4 adds RenewBatch (renewbatch.go), the renewals that
	// reached the leader together in one entry. Only a RenewBatch is written
	// with it: a node too old to know it stops on the entry (unknown
	// version) instead of skipping renewals the others apply.
	CommandVersion4 byte = 4
	// MaxCommandVersion is the highest envelope version this build's Decode
	// accepts: what a node publishes as the highest command version it
	// applies (StatusResponse.max_command_version), so that a leader writes
	// an entry of a newer version only once every member applies it
	// (docs/design.md#replicated-commands, etcd's cluster version).
	MaxCommandVersion = CommandVersion4
)

// Encode returns the wire form of c: an envelope version byte (CommandVersion;
// CommandVersion2 when c uses Renew, SeenIndex, LockDelayMS or Principal;
// CommandVersion3 when it uses Mode, Limit, Session or a session command;
// CommandVersion4 for a RenewBatch) followed by the deterministic protobuf
// encoding of corepb.Command (core/proto), carrying only the fields of c.Op.
// It fails with ErrInvalidArgument for an unknown Op or Mode, a ModeShared
// Grant with a Limit (see ValidateMode), a RenewBatch with no renewals, or
// strings that are not valid UTF-8; it does not check length limits (see
// ValidateKey). It is a pure function, safe for concurrent use.
func Encode(c Command) ([]byte, error) {
	return AppendEncode(nil, c)
}

// AppendEncode appends Encode(c) to dst and returns the extended slice (dst
// unchanged on error), so a caller that wraps the command in an envelope of
// its own writes both into one buffer. Errors are Encode's.
func AppendEncode(dst []byte, c Command) ([]byte, error) {
	if out, ok := appendLockWire(dst, c); ok {
		return out, nil
	}
	var m corepb.Command
	version := CommandVersion
	switch c.Op {
	case OpNoop:
		m.Op = &corepb.Command_Noop{Noop: &corepb.Noop{}}
	case OpGrant:
		if err := ValidateMode(c.Mode, c.Limit); err != nil {
			return dst, fmt.Errorf("encode grant: %w", err)
		}
		m.Op = &corepb.Command_Grant{Grant: &corepb.Grant{
			Key: c.Key, LeaseMs: c.LeaseMS, Owner: c.Owner, LockDelayMs: c.LockDelayMS, Principal: c.Principal,
			Mode: uint32(c.Mode), Limit: c.Limit, Session: c.Session,
		}}
		version = grantVersion(c)
	case OpRelease:
		m.Op = &corepb.Command_Release{Release: &corepb.Release{Key: c.Key, Token: c.Token}}
	case OpRenew:
		m.Op = &corepb.Command_Renew{Renew: &corepb.Renew{Key: c.Key, Token: c.Token}}
		version = CommandVersion2
	case OpExpire:
		m.Op = &corepb.Command_Expire{Expire: &corepb.Expire{Key: c.Key, Token: c.Token, SeenIndex: c.SeenIndex}}
		if c.SeenIndex != 0 {
			version = CommandVersion2
		}
	case OpSetMember:
		m.Op = &corepb.Command_SetMember{SetMember: &corepb.SetMember{Id: c.MemberID, ApiAddr: c.APIAddr}}
	case OpCreateSession:
		m.Op = &corepb.Command_CreateSession{CreateSession: &corepb.CreateSession{TtlMs: c.LeaseMS, Principal: c.Principal}}
		version = CommandVersion3
	case OpKeepAliveSession:
		m.Op = &corepb.Command_KeepAliveSession{KeepAliveSession: &corepb.KeepAliveSession{Id: c.Session}}
		version = CommandVersion3
	case OpCloseSession:
		m.Op = &corepb.Command_CloseSession{CloseSession: &corepb.CloseSession{Id: c.Session}}
		version = CommandVersion3
	case OpExpireSession:
		m.Op = &corepb.Command_ExpireSession{ExpireSession: &corepb.ExpireSession{Id: c.Session, SeenIndex: c.SeenIndex}}
		version = CommandVersion3
	case OpRenewBatch:
		if c.Batch == nil || c.Batch.Len() == 0 {
			return dst, fmt.Errorf("%w: encode: renew batch without renewals", ErrInvalidArgument)
		}
		m.Op = &corepb.Command_RenewBatch{RenewBatch: encodeRenewals(c.Batch)}
		version = CommandVersion4
	default:
		return dst, fmt.Errorf("%w: encode: unknown op %v", ErrInvalidArgument, c.Op)
	}
	buf := slices.Grow(dst, 1+proto.Size(&m))
	buf = append(buf, version)
	// UseCachedSize: the sizes proto.Size has just cached in m (unchanged
	// since) are reused, rather than computed again by the marshal.
	buf, err := proto.MarshalOptions{Deterministic: true, UseCachedSize: true}.MarshalAppend(buf, &m)
	if err != nil {
		return dst, fmt.Errorf("%w: encode %v: %v", ErrInvalidArgument, c.Op, err)
	}
	return buf, nil
}

// grantVersion is the envelope version of the Grant c (Encode).
func grantVersion(c Command) byte {
	switch {
	case c.Mode != ModeExclusive || c.Limit != 0 || c.Session != 0:
		return CommandVersion3
	case c.LockDelayMS != 0 || c.Principal != "":
		return CommandVersion2
	}
	return CommandVersion
}

// Decode parses the wire form written by Encode. Errors wrap ErrDecode: an
// empty entry, an unknown version byte, bytes that are not a corepb.Command
// (including strings that are not valid UTF-8), a Command with no op set, or
// a Renew in a CommandVersion envelope, a session command below
// CommandVersion3 or a RenewBatch below CommandVersion4 (no node ever wrote
// one), an empty RenewBatch, or a version 3 Grant with an
// unknown mode or a shared mode with a limit. An entry of an older version
// decodes exactly as before the next version existed: the fields added since
// are ignored. Fields
// unknown to a version are ignored, as protobuf does; anything that changes
// the meaning of an existing command needs a new version. Whatever Decode
// accepts, Encode re-encodes to an entry that decodes to the same Command
// (FuzzDecode). It is a pure function, safe for concurrent use.
func Decode(b []byte) (Command, error) {
	if len(b) == 0 {
		return Command{}, fmt.Errorf("%w: empty entry", ErrDecode)
	}
	version := b[0]
	if version < CommandVersion || version > MaxCommandVersion {
		return Command{}, fmt.Errorf("%w: unknown command version %d", ErrDecode, version)
	}
	if op, g, r, ok := readLockWire(b[1:]); ok {
		if op == opReleaseField {
			return Release(r.key, r.token), nil
		}
		return grantCommand(version, g)
	}
	return decodeProto(version, b[1:])
}

// decodeProto is Decode of an entry of version (checked) whose bytes after
// the version byte, b, are read by proto.Unmarshal: every entry that is not
// a Grant or a Release in the canonical form (codecwire.go).
func decodeProto(version byte, b []byte) (Command, error) {
	var m corepb.Command
	if err := proto.Unmarshal(b, &m); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	v2, v3 := version >= CommandVersion2, version >= CommandVersion3
	switch op := m.Op.(type) {
	case *corepb.Command_Noop:
		return Noop(), nil
	case *corepb.Command_Grant:
		g := op.Grant
		return grantCommand(version, wireGrant{key: g.GetKey(), leaseMS: g.GetLeaseMs(), owner: g.GetOwner(),
			lockDelayMS: g.GetLockDelayMs(), principal: g.GetPrincipal(), mode: g.GetMode(), limit: g.GetLimit(), session: g.GetSession()})
	case *corepb.Command_Release:
		return Release(op.Release.GetKey(), op.Release.GetToken()), nil
	case *corepb.Command_Renew:
		if !v2 {
			return Command{}, fmt.Errorf("%w: renew in a version %d entry", ErrDecode, version)
		}
		return Renew(op.Renew.GetKey(), op.Renew.GetToken()), nil
	case *corepb.Command_Expire:
		c := Expire(op.Expire.GetKey(), op.Expire.GetToken())
		if v2 {
			c.SeenIndex = op.Expire.GetSeenIndex()
		}
		return c, nil
	case *corepb.Command_SetMember:
		return SetMember(op.SetMember.GetId(), op.SetMember.GetApiAddr()), nil
	case *corepb.Command_CreateSession, *corepb.Command_KeepAliveSession, *corepb.Command_CloseSession, *corepb.Command_ExpireSession:
		if !v3 {
			return Command{}, fmt.Errorf("%w: session command in a version %d entry", ErrDecode, version)
		}
		return decodeSession(m.Op), nil
	case *corepb.Command_RenewBatch:
		if version < CommandVersion4 {
			return Command{}, fmt.Errorf("%w: renew batch in a version %d entry", ErrDecode, version)
		}
		return decodeRenewals(op.RenewBatch)
	}
	return Command{}, fmt.Errorf("%w: command with no op", ErrDecode)
}

// encodeRenewals is r on the wire.
func encodeRenewals(r *Renewals) *corepb.RenewBatch {
	m := &corepb.RenewBatch{Sessions: r.Sessions, Locks: make([]*corepb.Renew, len(r.Locks))}
	for i, l := range r.Locks {
		m.Locks[i] = &corepb.Renew{Key: l.Key, Token: l.Token}
	}
	return m
}

// decodeRenewals returns the RenewBatch of a version 4 entry; an empty one
// (no node writes it) is an ErrDecode.
func decodeRenewals(m *corepb.RenewBatch) (Command, error) {
	if len(m.GetSessions())+len(m.GetLocks()) == 0 {
		return Command{}, fmt.Errorf("%w: renew batch without renewals", ErrDecode)
	}
	var sessions []uint64
	if len(m.GetSessions()) > 0 {
		sessions = m.GetSessions()
	}
	var locks []LockRef
	if len(m.GetLocks()) > 0 {
		locks = make([]LockRef, len(m.GetLocks()))
		for i, l := range m.GetLocks() {
			locks[i] = LockRef{Key: l.GetKey(), Token: l.GetToken()}
		}
	}
	return RenewBatch(sessions, locks), nil
}

// decodeSession returns the Command of a session op (version 3 entries).
func decodeSession(op any) Command {
	switch op := op.(type) {
	case *corepb.Command_CreateSession:
		return CreateSession(op.CreateSession.GetTtlMs()).WithPrincipal(op.CreateSession.GetPrincipal())
	case *corepb.Command_KeepAliveSession:
		return KeepAliveSession(op.KeepAliveSession.GetId())
	case *corepb.Command_CloseSession:
		return CloseSession(op.CloseSession.GetId())
	case *corepb.Command_ExpireSession:
		return ExpireSession(op.ExpireSession.GetId(), op.ExpireSession.GetSeenIndex())
	}
	return Command{}
}
