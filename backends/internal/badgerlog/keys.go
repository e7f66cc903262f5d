package badgerlog

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// IndexKey returns prefix followed by index as 8 big-endian bytes, so that
// badger's byte order of keys under prefix is the numeric order of indexes.
func IndexKey(prefix []byte, index uint64) []byte {
	k := make([]byte, len(prefix)+8)
	copy(k, prefix)
	binary.BigEndian.PutUint64(k[len(prefix):], index)
	return k
}

// ParseIndexKey returns the index encoded in key by IndexKey(prefix, index).
// It fails with ErrCorrupt when key is not prefix plus 8 bytes.
func ParseIndexKey(prefix, key []byte) (uint64, error) {
	if len(key) != len(prefix)+8 || !bytes.HasPrefix(key, prefix) {
		return 0, fmt.Errorf("%w: key %q is not an index key under %q", ErrCorrupt, key, prefix)
	}
	return binary.BigEndian.Uint64(key[len(prefix):]), nil
}

// EncodeUint64 returns v as 8 big-endian bytes.
func EncodeUint64(v uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, v)
}

// DecodeUint64 parses the 8 big-endian bytes written by EncodeUint64; it fails
// with ErrCorrupt for any other length.
func DecodeUint64(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: uint64 value of %d bytes", ErrCorrupt, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// FirstIndex returns the smallest index ≥ from stored under prefix (keys made
// by IndexKey), and false when there is none. Values are not read.
func FirstIndex(txn *badger.Txn, prefix []byte, from uint64) (uint64, bool, error) {
	return seekIndex(txn, prefix, from, false)
}

// LastIndex returns the largest index ≤ upTo stored under prefix (keys made by
// IndexKey), and false when there is none. Values are not read.
func LastIndex(txn *badger.Txn, prefix []byte, upTo uint64) (uint64, bool, error) {
	return seekIndex(txn, prefix, upTo, true)
}

func seekIndex(txn *badger.Txn, prefix []byte, at uint64, reverse bool) (uint64, bool, error) {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Reverse = reverse
	opts.Prefix = prefix
	it := txn.NewIterator(opts)
	defer it.Close()
	it.Seek(IndexKey(prefix, at))
	if !it.ValidForPrefix(prefix) {
		return 0, false, nil
	}
	idx, err := ParseIndexKey(prefix, it.Item().Key())
	if err != nil {
		return 0, false, err
	}
	return idx, true, nil
}
