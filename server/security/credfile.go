package security

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// CredentialFileError is the error for a credential file (policy, tokens,
// private key, revocation list) that another local user could rewrite: one
// writable by group or others, or owned by a user other than the node's
// and root. errors.Is(err, ErrInsecureFile) is true for it.
type CredentialFileError struct {
	// Kind names the file's role ("policy file", "private key", ...);
	// Path is the file; Mode its permission bits.
	Kind, Path string
	Mode       fs.FileMode
	// Owner is the file's owning uid when that is what is wrong, else -1.
	Owner int
}

func (e *CredentialFileError) Error() string {
	if e.Owner >= 0 {
		return fmt.Sprintf("security: %s %s (mode %04o) is owned by uid %d, neither this process's user nor root; refusing it (chown it to the node's user)",
			e.Kind, e.Path, e.Mode.Perm(), e.Owner)
	}
	return fmt.Sprintf("security: %s %s has mode %04o, writable by group or others; refusing it (chmod go-w %s)",
		e.Kind, e.Path, e.Mode.Perm(), e.Path)
}

// Is reports whether target is ErrInsecureFile.
func (e *CredentialFileError) Is(target error) bool { return target == ErrInsecureFile }

// checkCredential refuses fi, the stat of the credential file path of role
// kind, when another local user could rewrite it: a group- or
// world-writable file would let that user grant itself every permission
// (policy), mint a token (tokens), swap the node's identity (key) or
// un-revoke a certificate (revocation list). OpenSSH refuses loose key
// files, and PostgreSQL a loose data dir, for the same reason. Root may own
// the file (secrets mounted by an orchestrator are often root's 0644).
func checkCredential(kind, path string, fi fs.FileInfo) error {
	if fi.Mode().Perm()&0o022 != 0 {
		return &CredentialFileError{Kind: kind, Path: path, Mode: fi.Mode(), Owner: -1}
	}
	if uid, ok := fileOwner(fi); ok && uid != 0 && uid != os.Geteuid() {
		return &CredentialFileError{Kind: kind, Path: path, Mode: fi.Mode(), Owner: uid}
	}
	return nil
}

// CheckCredentialFile stats path (following symbolic links, as a reader
// would) and applies checkCredential. Errors: a *CredentialFileError
// (ErrInsecureFile), or the file system's with the role and path.
func CheckCredentialFile(kind, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	return checkCredential(kind, path, fi)
}

// readCredentialFile reads the credential file path of role kind after
// checking, on the open file itself (no window between check and read),
// that no other local user could have written it. Errors as
// CheckCredentialFile.
func readCredentialFile(kind, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", kind, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", kind, err)
	}
	if err := checkCredential(kind, path, fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", kind, err)
	}
	return data, nil
}
