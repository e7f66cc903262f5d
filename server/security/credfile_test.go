package security_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/security"
)

// TestCredentialFilesWritableByOthersRefused: a policy file, a tokens file,
// a private key and a revocation list that group or others may write are
// refused at load (start) and on reload, with the file and its mode in the
// message; the previous material stays in use after a refused reload. A
// file owned by another non-root user is refused likewise.
func TestCredentialFilesWritableByOthersRefused(t *testing.T) {
	p := newPKI(t)
	revoke(t, p, p.issueNode(t, "gone"))
	policy := filepath.Join(p.dir, "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("rules:\n  - principal: admin\n    allow: [admin]\n"), 0o600))
	tokens := filepath.Join(p.dir, "tokens.yaml")
	require.NoError(t, os.WriteFile(tokens, []byte("tokens: []\n"), 0o600))
	files := p.crlFiles(true)

	auth := func() error {
		_, err := security.NewAuthenticator(security.AuthConfig{PolicyFile: policy, TokensFile: tokens})
		return err
	}
	tls := func() error {
		_, err := security.NewReloader(files, nil)
		return err
	}
	a, err := security.NewAuthenticator(security.AuthConfig{PolicyFile: policy, TokensFile: tokens})
	require.NoError(t, err)
	r, err := security.NewReloader(files, nil)
	require.NoError(t, err)
	reloadAuth := func() error { return a.Reload("test") }

	for _, tc := range []struct {
		name, path, kind string
		start, reload    func() error
	}{
		{"policy", policy, "policy file", auth, reloadAuth},
		{"tokens", tokens, "tokens file", auth, reloadAuth},
		{"key", files.KeyFile, "private key", tls, r.Reload},
		{"crl", files.CRLFile, "revocation list", tls, r.Reload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fi, err := os.Stat(tc.path)
			require.NoError(t, err)
			defer func() { require.NoError(t, os.Chmod(tc.path, fi.Mode().Perm())) }()
			for _, mode := range []os.FileMode{0o666, 0o620, 0o602} {
				require.NoError(t, os.Chmod(tc.path, mode))
				for name, call := range map[string]func() error{"start": tc.start, "reload": tc.reload} {
					err := call()
					require.ErrorIs(t, err, security.ErrInsecureFile, "%s with mode %04o", name, mode)
					assert.Contains(t, err.Error(), tc.kind+" "+tc.path)
					assert.Contains(t, err.Error(), fmt.Sprintf("mode %04o", mode))
				}
			}
			require.NoError(t, os.Chmod(tc.path, 0o644), "readable by others is fine: only writing is a threat")
			require.NoError(t, tc.start())
			require.NoError(t, tc.reload())

			if os.Geteuid() != 0 {
				return // only root can give a file to another user
			}
			require.NoError(t, os.Chown(tc.path, 4242, 4242))
			defer func() { require.NoError(t, os.Chown(tc.path, 0, 0)) }()
			err = tc.start()
			require.ErrorIs(t, err, security.ErrInsecureFile)
			assert.Contains(t, err.Error(), "owned by uid 4242")
			assert.Contains(t, err.Error(), tc.path)
		})
	}
	assert.NotNil(t, a.Policy(), "refused reloads kept the policy")
	assert.Equal(t, 1, r.Revocations().Len(), "refused reloads kept the list")
}
