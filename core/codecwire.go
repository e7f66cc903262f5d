package core

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The lock cycle's two commands, Grant and Release, are most of the log, and
// every node decodes every entry it applies. Their wire form is written and
// read here field by field (protowire) instead of through the protobuf
// runtime's reflection, which allocates the Command, its oneof wrapper and
// the inner message for every entry and walks their descriptors. The bytes
// are the ones proto.MarshalOptions{Deterministic: true} writes for the same
// corepb.Command (fields in number order, zero values left out, the oneof's
// message always present), and reading accepts only that canonical form;
// anything else (a field repeated or out of order, a field this build does
// not know, a string that is not UTF-8, a value wider than its field) goes
// through proto.Unmarshal as before, so Decode's result, errors included,
// is the same for every input (TestLockWireMatchesProto, FuzzDecode).

// Field numbers of corepb.Command's ops and of corepb.Grant's and
// corepb.Release's fields (core/proto/ticketd/core/v1/command.proto).
const (
	opGrantField   = 1
	opReleaseField = 2

	grantKeyField         = 1
	grantLeaseField       = 2
	grantOwnerField       = 3
	grantLockDelayField   = 4
	grantPrincipalField   = 5
	grantModeField        = 6
	grantLimitField       = 7
	grantSessionField     = 8
	releaseKeyField       = 1
	releaseTokenField     = 2
	lastGrantField        = grantSessionField
	maxSingleByteFieldNum = 15 // tags of fields 1-15 are one byte
)

// wireGrant is a corepb.Grant's fields as read from an entry.
type wireGrant struct {
	key, owner, principal string
	leaseMS, lockDelayMS  int64
	mode, limit           uint32
	session               uint64
}

// wireRelease is a corepb.Release's fields as read from an entry.
type wireRelease struct {
	key   string
	token uint64
}

// grantCommand is the Grant a version's entry with g's fields decodes to:
// version 1 ignores the fields added since, version 3 checks the mode.
func grantCommand(version byte, g wireGrant) (Command, error) {
	c := Grant(g.key, g.leaseMS, g.owner)
	if version >= CommandVersion2 {
		c.LockDelayMS, c.Principal = g.lockDelayMS, g.principal
	}
	if version >= CommandVersion3 {
		if g.mode > uint32(ModeShared) {
			return Command{}, fmt.Errorf("%w: grant with unknown mode %d", ErrDecode, g.mode)
		}
		c.Mode, c.Limit, c.Session = Mode(g.mode), g.limit, g.session
		if ValidateMode(c.Mode, c.Limit) != nil {
			return Command{}, fmt.Errorf("%w: shared grant with limit %d", ErrDecode, c.Limit)
		}
	}
	return c, nil
}

// appendLockWire appends the envelope version and wire form of c to dst
// when c is a Grant or a Release that Encode accepts; ok is false for any
// other command, or one Encode must refuse, which the protobuf path then
// encodes (or refuses with its error).
func appendLockWire(dst []byte, c Command) (out []byte, ok bool) {
	switch c.Op {
	case OpGrant:
		if ValidateMode(c.Mode, c.Limit) != nil || !utf8.ValidString(c.Key) || !utf8.ValidString(c.Owner) || !utf8.ValidString(c.Principal) {
			return dst, false
		}
		n := sizeString(c.Key) + sizeVarint(uint64(c.LeaseMS)) + sizeString(c.Owner) +
			sizeVarint(uint64(c.LockDelayMS)) + sizeString(c.Principal) + sizeVarint(uint64(c.Mode)) +
			sizeVarint(uint64(c.Limit)) + sizeVarint(c.Session)
		out = appendOpHeader(dst, grantVersion(c), opGrantField, n)
		out = appendString(out, grantKeyField, c.Key)
		out = appendVarint(out, grantLeaseField, uint64(c.LeaseMS))
		out = appendString(out, grantOwnerField, c.Owner)
		out = appendVarint(out, grantLockDelayField, uint64(c.LockDelayMS))
		out = appendString(out, grantPrincipalField, c.Principal)
		out = appendVarint(out, grantModeField, uint64(c.Mode))
		out = appendVarint(out, grantLimitField, uint64(c.Limit))
		out = appendVarint(out, grantSessionField, c.Session)
		return out, true
	case OpRelease:
		if !utf8.ValidString(c.Key) {
			return dst, false
		}
		n := sizeString(c.Key) + sizeVarint(c.Token)
		out = appendOpHeader(dst, CommandVersion, opReleaseField, n)
		out = appendString(out, releaseKeyField, c.Key)
		out = appendVarint(out, releaseTokenField, c.Token)
		return out, true
	}
	return dst, false
}

// appendOpHeader appends the version byte and the tag and length of the
// op's message of n bytes, with room for them.
func appendOpHeader(dst []byte, version byte, field protowire.Number, n int) []byte {
	need := 1 + 1 + protowire.SizeVarint(uint64(n)) + n
	if cap(dst)-len(dst) < need {
		grown := make([]byte, len(dst), len(dst)+need)
		copy(grown, dst)
		dst = grown
	}
	dst = append(dst, version)
	dst = protowire.AppendTag(dst, field, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(n))
}

// sizeString and sizeVarint are the bytes a field with a one-byte tag
// takes: none for a zero value, which proto3 leaves out.
func sizeString(s string) int {
	if s == "" {
		return 0
	}
	return 1 + protowire.SizeBytes(len(s))
}

func sizeVarint(v uint64) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(v)
}

func appendString(b []byte, field protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendVarint(b []byte, field protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, field, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// readLockWire reads b, an entry after its version byte, when it is a Grant
// or a Release in the canonical form appendLockWire writes (see above): op
// is opGrantField with g set, or opReleaseField with r set. ok is false for
// anything else, which proto.Unmarshal must read.
func readLockWire(b []byte) (op protowire.Number, g wireGrant, r wireRelease, ok bool) {
	if len(b) < 2 {
		return 0, g, r, false
	}
	op = protowire.Number(b[0] >> 3)
	if b[0]&7 != byte(protowire.BytesType) || (op != opGrantField && op != opReleaseField) {
		return 0, g, r, false
	}
	body, n := protowire.ConsumeBytes(b[1:])
	if n < 0 || 1+n != len(b) {
		return 0, g, r, false // truncated, or more fields after the op
	}
	last := protowire.Number(0)
	for len(body) > 0 {
		tag := body[0]
		field, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		if tag >= 0x80 || field <= last || field > maxSingleByteFieldNum {
			return 0, g, r, false
		}
		last = field
		body = body[1:]
		var (
			v uint64
			s string
		)
		switch typ {
		case protowire.VarintType:
			if v, n = protowire.ConsumeVarint(body); n < 0 {
				return 0, g, r, false
			}
		case protowire.BytesType:
			raw, m := protowire.ConsumeBytes(body)
			if m < 0 || !utf8.Valid(raw) {
				return 0, g, r, false
			}
			s, n = string(raw), m
		default:
			return 0, g, r, false
		}
		body = body[n:]
		if op == opReleaseField {
			if !setReleaseField(&r, field, typ, s, v) {
				return 0, g, r, false
			}
		} else if !setGrantField(&g, field, typ, s, v) {
			return 0, g, r, false
		}
	}
	return op, g, r, true
}

// setGrantField sets g's field of the given number from s or v, and
// reports false for a field Grant does not have with that wire type, or a
// value wider than its field.
func setGrantField(g *wireGrant, field protowire.Number, typ protowire.Type, s string, v uint64) bool {
	switch {
	case field > lastGrantField:
		return false
	case field == grantKeyField || field == grantOwnerField || field == grantPrincipalField:
		if typ != protowire.BytesType {
			return false
		}
	case typ != protowire.VarintType:
		return false
	}
	switch field {
	case grantKeyField:
		g.key = s
	case grantLeaseField:
		g.leaseMS = int64(v)
	case grantOwnerField:
		g.owner = s
	case grantLockDelayField:
		g.lockDelayMS = int64(v)
	case grantPrincipalField:
		g.principal = s
	case grantModeField, grantLimitField:
		if v > uint64(^uint32(0)) {
			return false
		}
		if field == grantModeField {
			g.mode = uint32(v)
		} else {
			g.limit = uint32(v)
		}
	case grantSessionField:
		g.session = v
	}
	return true
}

// setReleaseField is setGrantField for a Release.
func setReleaseField(r *wireRelease, field protowire.Number, typ protowire.Type, s string, v uint64) bool {
	switch {
	case field == releaseKeyField && typ == protowire.BytesType:
		r.key = s
	case field == releaseTokenField && typ == protowire.VarintType:
		r.token = v
	default:
		return false
	}
	return true
}
