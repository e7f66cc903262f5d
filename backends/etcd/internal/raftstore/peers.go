package raftstore

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// keyPeers holds the backend's address book (opaque to this package).
var keyPeers = []byte("etcd/peers")

// Peers returns the address book last written by SavePeers (nil when none).
// It was verified by Open; the caller owns the returned slice.
func (s *Store) Peers() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.peers...)
}

// SavePeers durably replaces the address book with data, an encoding chosen by
// the caller (the etcd backend keeps member ids and raft addresses there so a
// restarted node can reach its peers before it replays the log). Errors are
// badger's.
func (s *Store) SavePeers(data []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	rec := sealRecord(data)
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(keyPeers, rec) }); err != nil {
		return fmt.Errorf("raftstore: save peers: %w", err)
	}
	s.mu.Lock()
	s.peers = append([]byte(nil), data...)
	s.mu.Unlock()
	return nil
}

// loadPeers reads and verifies the address book record.
func (s *Store) loadPeers(txn *badger.Txn) error {
	rec, err := get(txn, keyPeers)
	if err != nil || rec == nil {
		return err
	}
	body, err := openRecord("peers", rec)
	if err != nil {
		return err
	}
	s.peers = body
	return nil
}
