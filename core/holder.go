package core

import "github.com/google/btree"

// holder is how the lock table stores one Lock: the fields every holder
// has inline, the ones only some use (a principal, a lock-delay, a mode or
// a limit, a session) behind one pointer that a plain exclusive lock
// leaves nil. It is 64 bytes where a Lock is 96, and the B-tree keeps its
// items by value in slices of up to 2×btreeDegree slots that are about
// half full after the splits of ascending inserts, so every byte of it
// counts about twice per lock (docs/benchmarks.md#scale-a-million-locks,
// what a lock costs in memory). The table converts to Lock at its edges:
// callers never see a holder.
type holder struct {
	key      string
	owner    string
	token    uint64
	modIndex uint64
	leaseMS  int64
	ext      *holderExt // nil: no principal, lock-delay, mode, limit or session
}

// holderExt holds a holder's rarely set fields. It is immutable once made:
// a holder copied into a copy-on-write clone of the tree (Snapshot) shares
// it, and a change of ModIndex (the only field a holder changes in place)
// keeps it.
type holderExt struct {
	principal   string
	lockDelayMS int64
	session     uint64
	limit       uint32
	mode        Mode
}

// holderLess orders holders by (key, token), as Lock's order.
func holderLess(a, b holder) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return a.token < b.token
}

// newLockTree returns an empty lock table ordered by holderLess.
func newLockTree() *btree.BTreeG[holder] { return btree.NewG(btreeDegree, holderLess) }

// sharedOnly is the ext of a shared holder with nothing else set, one for
// all of them (an ext is never changed), so that granting a shared lock
// does not allocate.
var sharedOnly = &holderExt{mode: ModeShared}

// holderOf is l as the table stores it.
func holderOf(l Lock) holder {
	h := holder{key: l.Key, owner: l.Owner, token: l.Token, modIndex: l.ModIndex, leaseMS: l.LeaseMS}
	x := holderExt{principal: l.Principal, lockDelayMS: l.LockDelayMS, session: l.Session, limit: l.Limit, mode: l.Mode}
	switch x {
	case holderExt{}:
	case *sharedOnly:
		h.ext = sharedOnly
	default:
		h.ext = &x
	}
	return h
}

// lock is h as a Lock.
func (h holder) lock() Lock {
	l := Lock{Key: h.key, Owner: h.owner, Token: h.token, ModIndex: h.modIndex, LeaseMS: h.leaseMS}
	if x := h.ext; x != nil {
		l.Principal, l.LockDelayMS, l.Session, l.Limit, l.Mode = x.principal, x.lockDelayMS, x.session, x.limit, x.mode
	}
	return l
}

// holderKey is the pivot of a search for key's holders (all tokens above 0).
func holderKey(key string) holder { return holder{key: key} }

// holderID is the pivot of a search for key's holder with token.
func holderID(key string, token uint64) holder { return holder{key: key, token: token} }
