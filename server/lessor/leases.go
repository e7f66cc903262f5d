package lessor

import "iter"

// leaseMap is the lessor's index of every lease it times, by leaseID. A
// holder's lease is filed under its fencing token alone: a token is granted
// once, to one holder of one key, and never again (tokens only grow,
// cluster-wide; Chubby §2.4 sequencers), so the key need not be part of
// the map's key; a lookup checks it against the item's. A map slot is then
// 16 bytes where a (key, token) key makes it 32: the map holds one slot per
// held lock and runs between half and seven eighths full, so this is
// about 20–35 bytes less per lock (docs/benchmarks.md#scale-a-million-locks).
// Sessions' leases are filed by session id in a map of their own (a
// session id is a log index, which a token may equal).
type leaseMap struct {
	locks    map[uint64]*item // holders' own leases, by token
	sessions map[uint64]*item // sessions' leases, by session id
}

// newLeaseMap returns an empty leaseMap sized for locks holders' and
// sessions sessions' leases.
func newLeaseMap(locks, sessions int) leaseMap {
	return leaseMap{locks: make(map[uint64]*item, locks), sessions: make(map[uint64]*item, sessions)}
}

// get returns the item of lease id.
func (m leaseMap) get(id leaseID) (*item, bool) {
	if id.key == "" {
		it, ok := m.sessions[id.token]
		return it, ok
	}
	it, ok := m.locks[id.token]
	if !ok || it.id.key != id.key {
		return nil, false
	}
	return it, true
}

// put files it under it.id, replacing any item of the same id.
func (m leaseMap) put(it *item) {
	if it.id.key == "" {
		m.sessions[it.id.token] = it
		return
	}
	m.locks[it.id.token] = it
}

// remove drops the item of lease id, if it is filed.
func (m leaseMap) remove(id leaseID) {
	if _, ok := m.get(id); !ok {
		return
	}
	if id.key == "" {
		delete(m.sessions, id.token)
		return
	}
	delete(m.locks, id.token)
}

// len is how many leases are filed.
func (m leaseMap) len() int { return len(m.locks) + len(m.sessions) }

// all yields every lease's id and item, in no order.
func (m leaseMap) all() iter.Seq2[leaseID, *item] {
	return func(yield func(leaseID, *item) bool) {
		for _, it := range m.locks {
			if !yield(it.id, it) {
				return
			}
		}
		for _, it := range m.sessions {
			if !yield(it.id, it) {
				return
			}
		}
	}
}
