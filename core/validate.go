package core

import (
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// FieldError is the error of every Validate function: one request field
// failed validation. Its text is one sentence in the API's terms, without a
// package prefix, because the server sends it to clients as the message of
// an InvalidArgument error (docs/api.md#errors: one clear sentence, the
// code once).
// errors.Is(err, ErrInvalidArgument) is true for it.
type FieldError struct {
	// Field is the API field at fault: "key", "owner", "principal",
	// "lease_ms", "lock_delay_ms", "token", "mode", "limit", "session" or
	// "ttl_ms".
	Field string
	// Msg is the sentence describing the fault; it names the field.
	Msg string
}

// Error implements error: the sentence alone.
func (e *FieldError) Error() string { return e.Msg }

// Is reports whether target is ErrInvalidArgument.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidArgument }

// invalid returns a *FieldError for field with the formatted sentence.
func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Limits on request fields, enforced by ValidateKey, ValidateOwner,
// ValidatePrincipal and the server before anything is proposed.
const (
	// MaxKeyBytes is the longest key accepted, in bytes of UTF-8.
	MaxKeyBytes = 1024
	// MaxOwnerBytes is the longest owner id accepted, in bytes (docs/api.md#errors, invalid_argument).
	MaxOwnerBytes = 128
	// MaxPrincipalBytes is the longest principal accepted, in bytes (a
	// certificate CN is at most 64 characters, RFC 5280 ub-common-name).
	MaxPrincipalBytes = 256
)

// ValidateKey checks that key is non-empty valid UTF-8 of at most MaxKeyBytes
// bytes without control characters (unicode.IsControl: NUL, newline, ESC,
// DEL, C1 controls, ...), which would corrupt logs, terminals and
// line-oriented tools, nor bidirectional controls and zero-width
// characters, which make keys print as other keys. Errors are *FieldError (ErrInvalidArgument)
// and name the offending character and its byte offset.
func ValidateKey(key string) error {
	if key == "" {
		return invalid("key", "key is empty")
	}
	return validateText("key", key, MaxKeyBytes)
}

// ValidateOwner checks that owner is valid UTF-8 of at most MaxOwnerBytes bytes
// without control characters (empty is allowed: the server replaces it with
// a unique id). Errors are *FieldError, as ValidateKey's.
func ValidateOwner(owner string) error {
	return validateText("owner", owner, MaxOwnerBytes)
}

// ValidatePrincipal checks that principal is valid UTF-8 of at most
// MaxPrincipalBytes bytes without control characters; empty is allowed (no
// authorization). Errors are *FieldError, as ValidateKey's.
func ValidatePrincipal(principal string) error {
	return validateText("principal", principal, MaxPrincipalBytes)
}

// validateText checks the length, UTF-8 and control-character rules shared by
// keys, owners and principals; field names the field in the error.
func validateText(field, s string, maxBytes int) error {
	if len(s) > maxBytes {
		return invalid(field, "%s is %d bytes, the limit is %d", field, len(s), maxBytes)
	}
	for i, r := range s {
		switch {
		case r == utf8.RuneError && invalidAt(s, i):
			return invalid(field, "%s is not valid UTF-8 (at byte %d)", field, i)
		case unicode.IsControl(r):
			return invalid(field, "%s has control character %U at byte %d", field, r, i)
		case unicode.Is(unicode.Bidi_Control, r) || invisible(r):
			return invalid(field, "%s has invisible formatting character %U at byte %d", field, r, i)
		case unicode.In(r, unicode.Zl, unicode.Zp):
			// U+2028 and U+2029 end a line in JavaScript, JSON viewers and
			// some terminals: a key holding one could forge a line of
			// `lock list` output or of a log read by such a tool.
			return invalid(field, "%s has line or paragraph separator %U at byte %d", field, r, i)
		}
	}
	return nil
}

// invisible reports the zero-width characters that, like the bidirectional
// controls (U+202E and friends, "Trojan Source"), let two keys that print
// alike differ, or one print as another in `lock list` and logs: zero-width
// space, word joiner and the byte-order mark. Joiners that scripts need
// (ZWJ, ZWNJ) stay allowed.
func invisible(r rune) bool {
	return r == '\u200B' || r == '\u2060' || r == '\uFEFF'
}

// invalidAt reports whether s holds an invalid UTF-8 sequence at byte i (where
// ranging over s yielded utf8.RuneError), as opposed to a real U+FFFD.
func invalidAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 1
}

// ValidateLockDelay checks 0 ≤ lockDelayMS ≤ maxMS (milliseconds; 0 means no
// lock-delay). Errors are *FieldError (ErrInvalidArgument).
func ValidateLockDelay(lockDelayMS, maxMS int64) error {
	if lockDelayMS < 0 || lockDelayMS > maxMS {
		return invalid("lock_delay_ms", "lock-delay %v is outside the allowed range 0s to %v", ms(lockDelayMS), ms(max(maxMS, 0)))
	}
	return nil
}

// ValidateLease checks minMS ≤ leaseMS ≤ maxMS (milliseconds) and leaseMS > 0.
// Errors are *FieldError (ErrInvalidArgument), e.g. "lease 50ms is outside the
// allowed range 100ms to 10m0s".
func ValidateLease(leaseMS, minMS, maxMS int64) error {
	return validateLeaseField("lease_ms", "lease", leaseMS, minMS, maxMS)
}

// ValidateTTL checks a session's ttl_ms (docs/api.md#createsession) against the same bounds
// as ValidateLease: minMS ≤ ttlMS ≤ maxMS (milliseconds) and ttlMS > 0.
// Errors are *FieldError (ErrInvalidArgument) naming "ttl_ms", e.g. "session
// ttl 50ms is outside the allowed range 100ms to 10m0s".
func ValidateTTL(ttlMS, minMS, maxMS int64) error {
	return validateLeaseField("ttl_ms", "session ttl", ttlMS, minMS, maxMS)
}

// validateLeaseField is ValidateLease for a field of that name, whose value
// the message calls what.
func validateLeaseField(field, what string, v, minMS, maxMS int64) error {
	if v <= 0 || v < minMS || v > maxMS {
		return invalid(field, "%s %s is outside the allowed range %s to %s", what, ms(v), ms(max(minMS, 1)), ms(maxMS))
	}
	return nil
}

// ms renders a millisecond count as a duration ("1.5s"), the way users
// write --ttl, for messages. A count a time.Duration cannot hold (beyond
// about 292 years either way) is printed as given ("9223372036854775807ms"):
// multiplying it would wrap around into a wrong, even negative, duration.
func ms(v int64) string {
	const perMS = int64(time.Millisecond)
	if v > math.MaxInt64/perMS || v < math.MinInt64/perMS {
		return strconv.FormatInt(v, 10) + "ms"
	}
	return (time.Duration(v) * time.Millisecond).String()
}

// ValidateToken checks that token is not 0 (tokens start at 1). Errors are *FieldError
// (ErrInvalidArgument).
func ValidateToken(token uint64) error {
	if token == 0 {
		return invalid("token", "token 0 is never granted (tokens start at 1)")
	}
	return nil
}

// ValidateMode checks a Grant's mode and semaphore limit: mode is
// ModeExclusive or ModeShared, and a limit (semaphore slots, ≥ 1; 0 for a
// plain lock) is not given with ModeShared, since a semaphore counts holders
// and has no modes. Errors are *FieldError (ErrInvalidArgument).
func ValidateMode(mode Mode, limit uint32) error {
	switch {
	case mode > ModeShared:
		return invalid("mode", "mode %d is unknown (exclusive or shared)", uint8(mode))
	case mode == ModeShared && limit != 0:
		return invalid("limit", "limit %d cannot be given with the shared mode (a semaphore has no modes)", limit)
	}
	return nil
}

// ValidateSession checks that a session id is not 0 (ids are log indexes,
// which start at 1). Errors are *FieldError (ErrInvalidArgument).
func ValidateSession(id uint64) error {
	if id == 0 {
		return invalid("session", "session 0 is never opened (session ids start at 1)")
	}
	return nil
}
