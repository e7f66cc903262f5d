package security

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ticketd/ticketd/core"
)

// Tokens is a parsed tokens file: bearer tokens, stored as SHA-256 digests
// only, each bound to a principal (Consul ACL tokens; the file never holds
// a token itself). Immutable once parsed; safe for concurrent use.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	principal string
	digest    [sha256.Size]byte
}

// tokensFile is the YAML form: tokens: [{principal: orders-svc, sha256: <hex>}].
type tokensFile struct {
	Tokens []struct {
		Principal string `yaml:"principal"`
		SHA256    string `yaml:"sha256"`
	} `yaml:"tokens"`
}

// ParseTokens parses a tokens file strictly: unknown fields, an empty
// principal, a digest that is not 64 hex digits, or a digest listed twice
// are errors wrapping ErrBadTokens. An empty file is an empty set.
func ParseTokens(data []byte) (*Tokens, error) {
	var f tokensFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadTokens, err)
	}
	t := &Tokens{}
	seen := map[[sha256.Size]byte]bool{}
	for i, e := range f.Tokens {
		if err := validatePrincipalName(e.Principal); err != nil {
			return nil, fmt.Errorf("%w: tokens[%d]: %v", ErrBadTokens, i, err)
		}
		raw, err := hex.DecodeString(strings.ToLower(e.SHA256))
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("%w: tokens[%d] (%s): sha256 must be 64 hex digits (the SHA-256 of the token)", ErrBadTokens, i, e.Principal)
		}
		var d [sha256.Size]byte
		copy(d[:], raw)
		if seen[d] {
			return nil, fmt.Errorf("%w: tokens[%d] (%s): digest listed twice", ErrBadTokens, i, e.Principal)
		}
		seen[d] = true
		t.entries = append(t.entries, tokenEntry{principal: e.Principal, digest: d})
	}
	return t, nil
}

// Lookup returns the principal token is bound to. It hashes token and
// compares the digest with every entry in constant time (no early exit), so
// the time taken does not reveal how close a guess was.
func (t *Tokens) Lookup(token string) (string, bool) {
	if t == nil || token == "" {
		return "", false
	}
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(d[:], t.entries[i].digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return t.entries[found].principal, true
}

// Len is the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// TokenDigest returns the hex SHA-256 of token, the form the tokens file
// stores (`ticketctl auth hash-token` prints it too).
func TokenDigest(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:])
}

// decodeStrict decodes one YAML document into v, refusing unknown fields.
// An empty document leaves v zero.
func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// validatePrincipalName refuses an empty principal name, or one that
// core.ValidatePrincipal refuses (too long, not UTF-8, control characters
// that would forge log lines): it could not be bound to a lock.
func validatePrincipalName(name string) error {
	if name == "" {
		return fmt.Errorf("principal is empty")
	}
	return core.ValidatePrincipal(name)
}
