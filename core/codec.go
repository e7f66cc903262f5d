package core

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/core/internal/corepb"
)

// CommandVersion is the envelope version byte written in front of every encoded
// Command. A node that reads any other version stops (ErrDecode) rather than
// guess: skipping an entry would fork the state.
const CommandVersion byte = 1

// Encode returns the wire form of c: CommandVersion followed by the
// deterministic protobuf encoding of corepb.Command (core/proto), carrying only
// the fields of c.Op. It fails with ErrInvalidArgument for an unknown Op or for
// strings that are not valid UTF-8; it does not check length limits (see
// ValidateKey). It is a pure function, safe for concurrent use.
func Encode(c Command) ([]byte, error) {
	var m corepb.Command
	switch c.Op {
	case OpNoop:
		m.Op = &corepb.Command_Noop{Noop: &corepb.Noop{}}
	case OpGrant:
		m.Op = &corepb.Command_Grant{Grant: &corepb.Grant{Key: c.Key, LeaseMs: c.LeaseMS, Owner: c.Owner}}
	case OpRelease:
		m.Op = &corepb.Command_Release{Release: &corepb.Release{Key: c.Key, Token: c.Token}}
	case OpExpire:
		m.Op = &corepb.Command_Expire{Expire: &corepb.Expire{Key: c.Key, Token: c.Token}}
	case OpSetMember:
		m.Op = &corepb.Command_SetMember{SetMember: &corepb.SetMember{Id: c.MemberID, ApiAddr: c.APIAddr}}
	default:
		return nil, fmt.Errorf("%w: encode: unknown op %v", ErrInvalidArgument, c.Op)
	}
	buf := make([]byte, 1, 1+proto.Size(&m))
	buf[0] = CommandVersion
	buf, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(buf, &m)
	if err != nil {
		return nil, fmt.Errorf("%w: encode %v: %v", ErrInvalidArgument, c.Op, err)
	}
	return buf, nil
}

// Decode parses the wire form written by Encode. Errors wrap ErrDecode: an
// empty entry, an unknown version byte, bytes that are not a corepb.Command
// (including strings that are not valid UTF-8), or a Command with no op set.
// Fields unknown to this version are ignored, as protobuf does, so fields can
// be added without a new CommandVersion; anything that changes the meaning of
// an existing command needs one. Whatever Decode accepts, Encode re-encodes to
// an entry that decodes to the same Command (FuzzDecode). It is a pure
// function, safe for concurrent use.
func Decode(b []byte) (Command, error) {
	if len(b) == 0 {
		return Command{}, fmt.Errorf("%w: empty entry", ErrDecode)
	}
	if b[0] != CommandVersion {
		return Command{}, fmt.Errorf("%w: unknown command version %d", ErrDecode, b[0])
	}
	var m corepb.Command
	if err := proto.Unmarshal(b[1:], &m); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	switch op := m.Op.(type) {
	case *corepb.Command_Noop:
		return Noop(), nil
	case *corepb.Command_Grant:
		return Grant(op.Grant.GetKey(), op.Grant.GetLeaseMs(), op.Grant.GetOwner()), nil
	case *corepb.Command_Release:
		return Release(op.Release.GetKey(), op.Release.GetToken()), nil
	case *corepb.Command_Expire:
		return Expire(op.Expire.GetKey(), op.Expire.GetToken()), nil
	case *corepb.Command_SetMember:
		return SetMember(op.SetMember.GetId(), op.SetMember.GetApiAddr()), nil
	}
	return Command{}, fmt.Errorf("%w: command with no op", ErrDecode)
}
