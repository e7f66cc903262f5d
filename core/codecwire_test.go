package core

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/core/internal/corepb"
)

// protoEncode is the protobuf runtime's wire form of a Grant or Release c
// with the given version byte: what Encode wrote before codecwire.go.
func protoEncode(t testing.TB, version byte, c Command) []byte {
	t.Helper()
	var m corepb.Command
	if c.Op == OpGrant {
		m.Op = &corepb.Command_Grant{Grant: &corepb.Grant{Key: c.Key, LeaseMs: c.LeaseMS, Owner: c.Owner,
			LockDelayMs: c.LockDelayMS, Principal: c.Principal, Mode: uint32(c.Mode), Limit: c.Limit, Session: c.Session}}
	} else {
		m.Op = &corepb.Command_Release{Release: &corepb.Release{Key: c.Key, Token: c.Token}}
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{version}, b...)
}

// randomLockCommand is a Grant or Release with each field zero or random.
func randomLockCommand(r *rand.Rand) Command {
	str := func() string {
		switch r.IntN(4) {
		case 0:
			return ""
		case 1:
			return "läs/鍵"
		case 2:
			return strings.Repeat("k", r.IntN(300))
		}
		return "orders/" + string(rune('a'+r.IntN(26)))
	}
	num := func() uint64 {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return ^uint64(0) - uint64(r.IntN(3))
		}
		return r.Uint64() >> r.IntN(64)
	}
	if r.IntN(2) == 0 {
		return Release(str(), num())
	}
	c := Grant(str(), int64(num()), str()).WithLockDelay(int64(num())).WithPrincipal(str())
	switch r.IntN(3) {
	case 0:
		c.Mode = ModeShared
	case 1:
		c.Limit = uint32(num())
	}
	c.Session = num()
	return c
}

// TestLockWireMatchesProto: Encode writes a Grant or Release byte for byte
// as the protobuf runtime's deterministic marshal does, and Decode reads
// every entry, well-formed or damaged, exactly as proto.Unmarshal's path
// does (codecwire.go).
func TestLockWireMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		c := randomLockCommand(r)
		got, err := Encode(c)
		if err != nil {
			t.Fatalf("Encode(%+v): %v", c, err)
		}
		version := CommandVersion
		if c.Op == OpGrant {
			version = grantVersion(c)
		}
		if want := protoEncode(t, version, c); string(got) != string(want) {
			t.Fatalf("Encode(%+v) = %x, protobuf writes %x", c, got, want)
		}
		prefix := []byte("envelope")
		appended, err := AppendEncode(prefix, c)
		if err != nil || string(appended) != "envelope"+string(got) {
			t.Fatalf("AppendEncode(%q, %+v) = %q, %v", prefix, c, appended, err)
		}
		checkSamePaths(t, got)
		// Damaged and non-canonical variants: a byte changed, cut short,
		// a field repeated or unknown after the op, any version byte.
		for range 8 {
			v := append([]byte(nil), got...)
			switch r.IntN(4) {
			case 0:
				v[r.IntN(len(v))] = byte(r.IntN(256))
			case 1:
				v = v[:r.IntN(len(v))]
			case 2:
				v = append(v, got[1:]...)
			case 3:
				v[0] = byte(r.IntN(6))
			}
			checkSamePaths(t, v)
		}
	}
	for _, b := range [][]byte{
		{CommandVersion, 0x0a, 0x00},                                                                   // empty Grant
		{CommandVersion, 0x12, 0x02, 0x10, 0x00},                                                       // explicit zero token
		{CommandVersion, 0x12, 0x04, 0x10, 0x01, 0x10, 0x02},                                           // token repeated: last wins
		{CommandVersion, 0x12, 0x04, 0x10, 0x01, 0x0a, 0x00},                                           // fields out of order
		{CommandVersion, 0x12, 0x03, 0x0a, 0x01, 0xff},                                                 // key not UTF-8
		{CommandVersion3, 0x0a, 0x06, 0x30, 0x80, 0x80, 0x80, 0x80, 0x10},                              // mode wider than uint32
		{CommandVersion, 0x12, 0x02, 0x18, 0x01},                                                       // unknown field
		{CommandVersion, 0x12, 0x02, 0x08, 0x01},                                                       // key with the wrong wire type
		{CommandVersion, 0x12, 0x0b, 0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}, // varint overflow
	} {
		checkSamePaths(t, b)
	}
	// A command Encode refuses leaves dst as it was, on either path.
	for _, c := range []Command{Grant("a", 1, "\xff"), Release("\xff", 1), Grant("a", 1, "o").WithMode(ModeShared).WithLimit(2), {Op: Op(250)}} {
		out, err := AppendEncode([]byte("envelope"), c)
		if !errors.Is(err, ErrInvalidArgument) || string(out) != "envelope" {
			t.Fatalf("AppendEncode(%+v) = %q, %v; want the envelope alone and ErrInvalidArgument", c, out, err)
		}
	}
}

// checkSamePaths fails t unless Decode(b) and the protobuf path agree,
// errors included.
func checkSamePaths(t testing.TB, b []byte) {
	t.Helper()
	got, gotErr := Decode(b)
	var want Command
	var wantErr error
	switch {
	case len(b) == 0 || b[0] < CommandVersion || b[0] > MaxCommandVersion:
		_, wantErr = Decode(b) // rejected before either path
	default:
		want, wantErr = decodeProto(b[0], b[1:])
	}
	if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%x) = %+v, %v; protobuf path %+v, %v", b, got, gotErr, want, wantErr)
	}
}

// FuzzLockWire: Decode and the protobuf path agree on every input. Fuzz
// with
//
//	go test -run='^$' -fuzz=FuzzLockWire -fuzztime=20s -fuzzminimizetime=200x ./core/
func FuzzLockWire(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 32 {
		b, err := Encode(randomLockCommand(r))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkSamePaths(t, b) })
}

// BenchmarkLockWire: encoding and decoding a Grant and a Release, as the
// leader proposes and every node applies them.
func BenchmarkLockWire(b *testing.B) {
	grant := Grant("orders/42", 10_000, "worker-1")
	release := Release("orders/42", 7)
	b.ReportAllocs()
	for b.Loop() {
		g, _ := Encode(grant)
		rel, _ := Encode(release)
		if _, err := Decode(g); err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(rel); err != nil {
			b.Fatal(err)
		}
	}
}
