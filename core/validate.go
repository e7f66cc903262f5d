package core

import (
	"fmt"
	"unicode/utf8"
)

// Limits on request fields, enforced by ValidateKey, ValidateOwner and the
// server before anything is proposed.
const (
	// MaxKeyBytes is the longest key accepted, in bytes of UTF-8.
	MaxKeyBytes = 1024
	// MaxOwnerBytes is the longest owner id accepted, in bytes (DESIGN.md API).
	MaxOwnerBytes = 128
)

// ValidateKey checks that key is non-empty valid UTF-8 of at most MaxKeyBytes
// bytes. Errors wrap ErrInvalidArgument.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidArgument)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: key is %d bytes, the limit is %d", ErrInvalidArgument, len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key is not valid UTF-8", ErrInvalidArgument)
	}
	return nil
}

// ValidateOwner checks that owner is valid UTF-8 of at most MaxOwnerBytes bytes
// (empty is allowed: the server replaces it with a unique id). Errors wrap ErrInvalidArgument.
func ValidateOwner(owner string) error {
	switch {
	case len(owner) > MaxOwnerBytes:
		return fmt.Errorf("%w: owner is %d bytes, the limit is %d", ErrInvalidArgument, len(owner), MaxOwnerBytes)
	case !utf8.ValidString(owner):
		return fmt.Errorf("%w: owner is not valid UTF-8", ErrInvalidArgument)
	}
	return nil
}

// ValidateLease checks minMS ≤ leaseMS ≤ maxMS (milliseconds) and leaseMS > 0.
// Errors wrap ErrInvalidArgument.
func ValidateLease(leaseMS, minMS, maxMS int64) error {
	if leaseMS <= 0 || leaseMS < minMS || leaseMS > maxMS {
		return fmt.Errorf("%w: lease_ms %d is outside [%d, %d]", ErrInvalidArgument, leaseMS, max(minMS, 1), maxMS)
	}
	return nil
}

// ValidateToken checks that token is not 0 (tokens start at 1). Errors wrap ErrInvalidArgument.
func ValidateToken(token uint64) error {
	if token == 0 {
		return fmt.Errorf("%w: token 0 is never granted", ErrInvalidArgument)
	}
	return nil
}
