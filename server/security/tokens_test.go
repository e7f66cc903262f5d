package security_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/security"
)

func tokensYAML(pairs ...string) string {
	var b strings.Builder
	b.WriteString("tokens:\n")
	for i := 0; i+1 < len(pairs); i += 2 {
		b.WriteString("  - principal: " + pairs[i] + "\n    sha256: " + security.TokenDigest(pairs[i+1]) + "\n")
	}
	return b.String()
}

func TestTokensLookup(t *testing.T) {
	toks, err := security.ParseTokens([]byte(tokensYAML("orders-svc", "s3cret-a", "billing", "s3cret-b")))
	require.NoError(t, err)
	require.Equal(t, 2, toks.Len())
	tests := []struct {
		name, token, want string
		ok                bool
	}{
		{"first", "s3cret-a", "orders-svc", true},
		{"second", "s3cret-b", "billing", true},
		{"wrong_token", "s3cret-c", "", false},
		{"digest_is_not_a_token", security.TokenDigest("s3cret-a"), "", false},
		{"empty", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := toks.Lookup(tc.token)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseTokensStrict(t *testing.T) {
	d := security.TokenDigest("x")
	tests := []struct{ name, yaml string }{
		{"unknown_field", "tokens:\n  - principal: a\n    sha256: " + d + "\n    token: x\n"},
		{"plain_token_not_digest", "tokens:\n  - principal: a\n    sha256: x\n"},
		{"short_digest", "tokens:\n  - principal: a\n    sha256: abcd\n"},
		{"empty_principal", "tokens:\n  - principal: \"\"\n    sha256: " + d + "\n"},
		{"duplicate_digest", "tokens:\n  - principal: a\n    sha256: " + d + "\n  - principal: b\n    sha256: " + d + "\n"},
		{"not_yaml", "tokens: {\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := security.ParseTokens([]byte(tc.yaml))
			require.ErrorIs(t, err, security.ErrBadTokens)
		})
	}
}

func FuzzParseTokens(f *testing.F) {
	f.Add([]byte(tokensYAML("orders-svc", "t1")))
	f.Add([]byte("tokens: []"))
	f.Add([]byte("tokens:\n  - principal: a\n    sha256: " + strings.ToUpper(security.TokenDigest("t")) + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		toks, err := security.ParseTokens(data)
		if err != nil {
			require.ErrorIs(t, err, security.ErrBadTokens)
			return
		}
		_, ok := toks.Lookup("")
		require.False(t, ok)
	})
}
