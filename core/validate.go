package core

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Limits on request fields, enforced by ValidateKey, ValidateOwner,
// ValidatePrincipal and the server before anything is proposed.
const (
	// MaxKeyBytes is the longest key accepted, in bytes of UTF-8.
	MaxKeyBytes = 1024
	// MaxOwnerBytes is the longest owner id accepted, in bytes (DESIGN.md API).
	MaxOwnerBytes = 128
	// MaxPrincipalBytes is the longest principal accepted, in bytes (a
	// certificate CN is at most 64 characters, RFC 5280 ub-common-name).
	MaxPrincipalBytes = 256
)

// ValidateKey checks that key is non-empty valid UTF-8 of at most MaxKeyBytes
// bytes without control characters (unicode.IsControl: NUL, newline, ESC,
// DEL, C1 controls, ...), which would corrupt logs, terminals and
// line-oriented tools (issue 12). Errors wrap ErrInvalidArgument and name the
// offending character and its byte offset.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidArgument)
	}
	return validateText("key", key, MaxKeyBytes)
}

// ValidateOwner checks that owner is valid UTF-8 of at most MaxOwnerBytes bytes
// without control characters (empty is allowed: the server replaces it with
// a unique id). Errors wrap ErrInvalidArgument, as ValidateKey's.
func ValidateOwner(owner string) error {
	return validateText("owner", owner, MaxOwnerBytes)
}

// ValidatePrincipal checks that principal is valid UTF-8 of at most
// MaxPrincipalBytes bytes without control characters; empty is allowed (no
// authorization). Errors wrap ErrInvalidArgument, as ValidateKey's.
func ValidatePrincipal(principal string) error {
	return validateText("principal", principal, MaxPrincipalBytes)
}

// validateText checks the length, UTF-8 and control-character rules shared by
// keys, owners and principals; field names the field in the error.
func validateText(field, s string, maxBytes int) error {
	if len(s) > maxBytes {
		return fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrInvalidArgument, field, len(s), maxBytes)
	}
	for i, r := range s {
		switch {
		case r == utf8.RuneError && invalidAt(s, i):
			return fmt.Errorf("%w: %s is not valid UTF-8 (at byte %d)", ErrInvalidArgument, field, i)
		case unicode.IsControl(r):
			return fmt.Errorf("%w: %s has control character %U at byte %d", ErrInvalidArgument, field, r, i)
		}
	}
	return nil
}

// invalidAt reports whether s holds an invalid UTF-8 sequence at byte i (where
// ranging over s yielded utf8.RuneError), as opposed to a real U+FFFD.
func invalidAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 1
}

// ValidateLockDelay checks 0 ≤ lockDelayMS ≤ maxMS (milliseconds; 0 means no
// lock-delay). Errors wrap ErrInvalidArgument.
func ValidateLockDelay(lockDelayMS, maxMS int64) error {
	if lockDelayMS < 0 || lockDelayMS > maxMS {
		return fmt.Errorf("%w: lock_delay_ms %d is outside [0, %d]", ErrInvalidArgument, lockDelayMS, max(maxMS, 0))
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
