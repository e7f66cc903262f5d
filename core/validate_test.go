package core_test

import (
	"fmt"
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
