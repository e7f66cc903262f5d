package waitq

import "github.com/ticketd/ticketd/core"

// This file is the queue's capacity rules (docs/semantics.md#modes-and-limits): what a key's holders
// and grants in flight leave room for, by mode and limit, and whose requests
// are refused, retried or held back. Every function here reads a KeyState and
// a key's gate under its shard's mutex; none changes them.

// keyLimit returns the key's limit and whether it has one: its holders'
// (the table decides), else that of its grants in flight and waiters.
func keyLimit(ks KeyState, st *keyState) (uint32, bool) {
	if len(ks.Holders) > 0 {
		return ks.Limit, true
	}
	return st.limit, !st.idle()
}

// fits reports whether w's grant may be proposed now beside the key's
// holders and grants in flight: the key is not under a lock-delay, no grant
// of w's owner is in flight, and either w's owner holds the key (not being
// removed: the grant returns that holder, taking no new slot) and the key is
// not over capacity with the grants in flight, or one more holder of w's
// mode fits (see Queue for the capacities). Nothing fits while a holder that
// asked for a lock-delay is being removed (Holder.LockDelay).
func fits(ks KeyState, st *keyState, w *waiter) bool {
	if ks.Delayed || flying(st, w.owner) || delaying(ks) {
		return false
	}
	n := len(ks.Holders) + len(st.flights)
	shared := allShared(ks, st)
	for _, h := range ks.Holders {
		if h.Owner == w.owner {
			if h.Removing {
				return false
			}
			// A retry: fits unless the grants in flight already overfill
			// the key (a pipelined handoff's grant beside the holder).
			return capacity(ks, st, shared) >= n
		}
	}
	switch {
	case n == 0:
		return true
	case w.limit > 0:
		return n < int(w.limit)
	default:
		return w.mode == core.ModeShared && shared
	}
}

// capacity is how many holders the key takes as it stands: its limit for a
// semaphore, any number when every holder and grant in flight is shared, else 1.
func capacity(ks KeyState, st *keyState, shared bool) int {
	if limit, _ := keyLimit(ks, st); limit > 0 {
		return int(limit)
	}
	if shared {
		return int(^uint(0) >> 1)
	}
	return 1
}

// allShared reports whether every holder and grant in flight of the key is
// shared (true when there are none).
func allShared(ks KeyState, st *keyState) bool {
	if len(ks.Holders) > 0 && (ks.Mode != core.ModeShared || ks.Limit > 0) {
		return false
	}
	for _, t := range st.flights {
		if t.mode != core.ModeShared || t.limit > 0 {
			return false
		}
	}
	return true
}

// refused reports whether the lock table alone shows the key held
// incompatibly with w by another owner, or under a lock-delay: what lets a
// request without wait be refused (ErrHeld). Holders being removed still
// hold; grants in flight and waiters do not count.
func refused(ks KeyState, w *waiter) bool {
	if ks.Delayed {
		return true
	}
	n := len(ks.Holders)
	switch {
	case n == 0 || holdsAny(ks, w.owner):
		return false
	case w.limit > 0:
		return n >= int(w.limit)
	default:
		return w.mode != core.ModeShared || ks.Mode != core.ModeShared || ks.Limit > 0
	}
}

// delaying reports whether a holder that asked for a lock-delay is being
// removed (see Holder.LockDelay).
func delaying(ks KeyState) bool {
	for _, h := range ks.Holders {
		if h.Removing && h.LockDelay {
			return true
		}
	}
	return false
}

// holds reports whether owner holds the key and is not being removed.
func holds(ks KeyState, owner string) bool {
	for _, h := range ks.Holders {
		if h.Owner == owner {
			return !h.Removing
		}
	}
	return false
}

// holdsAny reports whether owner holds the key, being removed or not.
func holdsAny(ks KeyState, owner string) bool {
	for _, h := range ks.Holders {
		if h.Owner == owner {
			return true
		}
	}
	return false
}

// removing reports whether owner holds the key and is being removed.
func removing(ks KeyState, owner string) bool {
	for _, h := range ks.Holders {
		if h.Owner == owner {
			return h.Removing
		}
	}
	return false
}

// flying reports whether a grant of owner is in flight on the key.
func flying(st *keyState, owner string) bool {
	for _, t := range st.flights {
		if t.owner == owner {
			return true
		}
	}
	return false
}

// waitersAhead reports whether a request that waits (not a tentative one,
// which itself only waits for grants in flight) is queued on the key.
func waitersAhead(st *keyState) bool {
	return len(st.queue) > st.tentative
}
