package core_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ticketd/ticketd/core"
)

func TestValidateKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		key     string
		wantErr bool
	}{
		{"one_byte", "a", false},
		{"path_like", "orders/42/payment", false},
		{"unicode", "läs/ключ/鍵", false},
		{"at_limit", strings.Repeat("k", core.MaxKeyBytes), false},
		{"multibyte_at_limit", strings.Repeat("é", core.MaxKeyBytes/2), false},
		{"empty", "", true},
		{"over_limit", strings.Repeat("k", core.MaxKeyBytes+1), true},
		{"multibyte_over_limit", strings.Repeat("é", core.MaxKeyBytes/2) + "k", true},
		{"invalid_utf8", "a\xffb", true},
		{"truncated_utf8", "\xe9\x94", true},
		{"replacement_character_is_fine", "a\uFFFDb", false},
		{"nul", "a\x00b", true},
		{"newline", "orders/1\n", true},
		{"carriage_return", "\rorders", true},
		{"tab", "a\tb", true},
		{"escape", "a\x1b[31mred", true},
		{"delete", "a\x7f", true},
		{"c1_control", "a\u0085", true},
		{"bidi_override", "orders/\u202Eevil", true},
		{"bidi_isolate", "a\u2066b", true},
		{"zero_width_space", "orders\u200B/1", true},
		{"byte_order_mark", "\uFEFForders", true},
		{"zero_width_joiner_is_fine", "a\u200Db", false},
		{"line_separator", "orders\u2028/1", true},
		{"paragraph_separator", "a\u2029b", true},
		{"no_break_space_is_fine", "a\u00A0b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := core.ValidateKey(tt.key)
			if tt.wantErr {
				assert.ErrorIs(t, err, core.ErrInvalidArgument)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

func TestValidateOwner(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		owner   string
		wantErr bool
	}{
		{"empty_is_allowed", "", false},
		{"typical", "worker-7f3a9c", false},
		{"at_limit", strings.Repeat("o", core.MaxOwnerBytes), false},
		{"over_limit", strings.Repeat("o", core.MaxOwnerBytes+1), true},
		{"invalid_utf8", "o\xfe", true},
		{"nul", "o\x00", true},
		{"newline", "worker\n1", true},
		{"escape", "\x1b]0;title\x07", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := core.ValidateOwner(tt.owner)
			if tt.wantErr {
				assert.ErrorIs(t, err, core.ErrInvalidArgument)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

func TestValidatePrincipal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		principal string
		wantErr   bool
	}{
		{"empty_is_allowed", "", false},
		{"cn", "orders-svc", false},
		{"unicode", "Zoë", false},
		{"at_limit", strings.Repeat("p", core.MaxPrincipalBytes), false},
		{"over_limit", strings.Repeat("p", core.MaxPrincipalBytes+1), true},
		{"invalid_utf8", "p\xff", true},
		{"newline", "admin\nops", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := core.ValidatePrincipal(tt.principal)
			if tt.wantErr {
				assert.ErrorIs(t, err, core.ErrInvalidArgument)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

// TestValidateControlCharacterError checks that the error names the
// character and its byte offset, so a client can find it.
func TestValidateControlCharacterError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		check func(string) error
		in    string
		want  string
	}{
		{"key_newline", core.ValidateKey, "ab\ncd", "key has control character U+000A at byte 2"},
		{"key_after_multibyte", core.ValidateKey, "é\x00", "key has control character U+0000 at byte 2"},
		{"owner_escape", core.ValidateOwner, "\x1b", "owner has control character U+001B at byte 0"},
		{"principal_delete", core.ValidatePrincipal, "p\x7f", "principal has control character U+007F at byte 1"},
		{"key_invalid_utf8", core.ValidateKey, "ab\xff", "key is not valid UTF-8 (at byte 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.check(tt.in)
			assert.ErrorIs(t, err, core.ErrInvalidArgument)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestValidateLockDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		ms, maxMS int64
		wantErr   bool
	}{
		{"zero_is_none", 0, 60_000, false},
		{"inside", 5000, 60_000, false},
		{"at_max", 60_000, 60_000, false},
		{"above_max", 60_001, 60_000, true},
		{"negative", -1, 60_000, true},
		{"any_when_max_zero", 1, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := core.ValidateLockDelay(tt.ms, tt.maxMS)
			if tt.wantErr {
				assert.ErrorIs(t, err, core.ErrInvalidArgument)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

func TestValidateLease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		leaseMS, min, max int64
		wantErr           bool
	}{
		{"inside", 10_000, 1000, 60_000, false},
		{"at_min", 1000, 1000, 60_000, false},
		{"at_max", 60_000, 1000, 60_000, false},
		{"no_lower_bound", 1, 0, 60_000, false},
		{"zero", 0, 0, 60_000, true},
		{"negative", -1, -10, 60_000, true},
		{"below_min", 999, 1000, 60_000, true},
		{"above_max", 60_001, 1000, 60_000, true},
		{"min_above_max", 5000, 6000, 4000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := core.ValidateLease(tt.leaseMS, tt.min, tt.max)
			if tt.wantErr {
				assert.ErrorIs(t, err, core.ErrInvalidArgument)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

func TestValidateToken(t *testing.T) {
	t.Parallel()
	assert.ErrorIs(t, core.ValidateToken(0), core.ErrInvalidArgument)
	assert.NoError(t, core.ValidateToken(1))
	assert.NoError(t, core.ValidateToken(^uint64(0)))
}

func TestNotLeaderError(t *testing.T) {
	t.Parallel()
	var err error = &core.NotLeaderError{Leader: core.Member{ID: "n2", RaftAddr: "127.0.0.1:7102"}}
	assert.ErrorIs(t, err, core.ErrNotLeader)
	assert.NotErrorIs(t, err, core.ErrStopped)
	assert.Contains(t, err.Error(), "n2")
	var nle *core.NotLeaderError
	if assert.ErrorAs(t, fmt.Errorf("propose: %w", err), &nle) {
		assert.Equal(t, "n2", nle.Leader.ID)
	}
	assert.ErrorIs(t, &core.NotLeaderError{}, core.ErrNotLeader)
	assert.NotEmpty(t, (&core.NotLeaderError{}).Error())
}

// TestValidateMessages: a validation error is one sentence in the API's
// terms, without a package prefix, because the server sends it to clients
// as the InvalidArgument message (docs/api.md#errors); it still matches
// ErrInvalidArgument and names its field.
func TestValidateMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		err   error
		field string
		want  string
	}{
		{"lease_below_min", core.ValidateLease(50, 100, 600000), "lease_ms", "lease 50ms is outside the allowed range 100ms to 10m0s"},
		{"lease_zero", core.ValidateLease(0, 0, 1000), "lease_ms", "lease 0s is outside the allowed range 1ms to 1s"},
		{"lock_delay", core.ValidateLockDelay(5000, 1000), "lock_delay_ms", "lock-delay 5s is outside the allowed range 0s to 1s"},
		{"ttl_below_min", core.ValidateTTL(50, 100, 600000), "ttl_ms", "session ttl 50ms is outside the allowed range 100ms to 10m0s"},
		// Counts a time.Duration cannot hold are printed as given, not wrapped
		// ("-1ms is outside..." was the message for the largest int64).
		{"lease_max_int64", core.ValidateLease(math.MaxInt64, 100, 600000), "lease_ms",
			"lease 9223372036854775807ms is outside the allowed range 100ms to 10m0s"},
		{"lease_min_int64", core.ValidateLease(math.MinInt64, 100, 600000), "lease_ms",
			"lease -9223372036854775808ms is outside the allowed range 100ms to 10m0s"},
		{"ttl_max_int64", core.ValidateTTL(math.MaxInt64, 100, 600000), "ttl_ms",
			"session ttl 9223372036854775807ms is outside the allowed range 100ms to 10m0s"},
		{"ttl_just_past_duration", core.ValidateTTL(math.MaxInt64/1_000_000+1, 100, 600000), "ttl_ms",
			"session ttl 9223372036855ms is outside the allowed range 100ms to 10m0s"},
		{"ttl_largest_duration", core.ValidateTTL(math.MaxInt64/1_000_000, 100, 600000), "ttl_ms",
			"session ttl 2562047h47m16.854s is outside the allowed range 100ms to 10m0s"},
		{"lock_delay_max_int64", core.ValidateLockDelay(math.MaxInt64, 1000), "lock_delay_ms",
			"lock-delay 9223372036854775807ms is outside the allowed range 0s to 1s"},
		{"bound_max_int64", core.ValidateLease(0, 1, math.MaxInt64), "lease_ms",
			"lease 0s is outside the allowed range 1ms to 9223372036854775807ms"},
		{"token_zero", core.ValidateToken(0), "token", "token 0 is never granted (tokens start at 1)"},
		{"empty_key", core.ValidateKey(""), "key", "key is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.ErrorIs(t, tt.err, core.ErrInvalidArgument)
			assert.EqualError(t, tt.err, tt.want)
			var fe *core.FieldError
			if assert.ErrorAs(t, tt.err, &fe) {
				assert.Equal(t, tt.field, fe.Field)
			}
		})
	}
}

func TestValidateMode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		mode  core.Mode
		limit uint32
		field string // "" for valid
	}{
		{"exclusive", core.ModeExclusive, 0, ""},
		{"shared", core.ModeShared, 0, ""},
		{"semaphore", core.ModeExclusive, 5, ""},
		{"semaphore_of_one", core.ModeExclusive, 1, ""},
		{"shared_with_limit", core.ModeShared, 2, "limit"},
		{"unknown_mode", core.Mode(2), 0, "mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := core.ValidateMode(tt.mode, tt.limit)
			if tt.field == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, core.ErrInvalidArgument)
			var fe *core.FieldError
			if assert.ErrorAs(t, err, &fe) {
				assert.Equal(t, tt.field, fe.Field)
			}
		})
	}
}

func TestValidateSession(t *testing.T) {
	t.Parallel()
	assert.ErrorIs(t, core.ValidateSession(0), core.ErrInvalidArgument)
	assert.NoError(t, core.ValidateSession(1))
}
