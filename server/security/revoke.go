package security

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// CRLFile is the revocation list of a certs directory, kept by `ticketctl
// cert revoke` and signed by its CA; a node loads it with client_crl_file
// or peer_crl_file.
const CRLFile = "ca.crl"

// DefaultCRLValidity is how long after its issue a list made by Revoke is
// current (its NextUpdate): a node keeps enforcing a list past it and logs
// a warning, so re-run `ticketctl cert revoke` (with any revoked serial)
// before then to re-sign it.
const DefaultCRLValidity = 30 * 24 * time.Hour

// Revoked is what Revoke did.
type Revoked struct {
	// Serial is the serial number added (or found already listed).
	Serial *big.Int
	// Already is true when the list named Serial before.
	Already bool
	// Number is the new list's CRL number; Entries how many it lists.
	Number  *big.Int
	Entries int
	// NextUpdate is when the new list stops being current.
	NextUpdate time.Time
	// Path is the list's file.
	Path string
}

// Revoke adds serial to the revocation list of the certs directory dir
// (CRLFile), creating it when missing, and signs the new list with dir's
// CA (ca.crt, ca.key): every earlier entry is kept, the CRL number is the
// previous one plus one (RFC 5280 section 5.2.3: it must increase), this
// update is now and the next update now+validity. An existing list that
// the CA did not sign is refused (ErrBadCRL), as a node would refuse it.
// The file is replaced atomically (mode 0644), so a node reloading it
// never reads half a list.
func Revoke(dir string, serial *big.Int, validity time.Duration) (*Revoked, error) {
	if serial == nil || serial.Sign() <= 0 {
		return nil, errors.New("security: a serial number is positive")
	}
	ca, err := LoadCA(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, CRLFile)
	now := time.Now()
	tmpl := &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: now, NextUpdate: now.Add(validity)}
	out := &Revoked{Serial: serial, Path: path, NextUpdate: tmpl.NextUpdate}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		prev, err := parseOwnCRL(data, ca.Cert)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if prev.Number != nil {
			tmpl.Number = new(big.Int).Add(prev.Number, big.NewInt(1))
		}
		for _, e := range prev.RevokedCertificateEntries {
			out.Already = out.Already || e.SerialNumber.Cmp(serial) == 0
			tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{
				SerialNumber: e.SerialNumber, RevocationTime: e.RevocationTime, ReasonCode: e.ReasonCode,
			})
		}
	}
	if !out.Already {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{SerialNumber: serial, RevocationTime: now})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign revocation list: %w", err)
	}
	if err := replaceFile(path, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	out.Number, out.Entries = tmpl.Number, len(tmpl.RevokedCertificateEntries)
	return out, nil
}

// parseOwnCRL parses data as the single revocation list Revoke writes and
// checks that ca signed it. Errors wrap ErrBadCRL.
func parseOwnCRL(data []byte, ca *x509.Certificate) (*x509.RevocationList, error) {
	ders, err := crlBlocks(data)
	if err != nil {
		return nil, err
	}
	if len(ders) != 1 {
		return nil, fmt.Errorf("%w: %d lists, want the one this CA keeps", ErrBadCRL, len(ders))
	}
	rl, err := x509.ParseRevocationList(ders[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCRL, err)
	}
	if err := checkCRLIssuer(rl, []*x509.Certificate{ca}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCRL, err)
	}
	return rl, nil
}

// CertSerial reads the PEM certificate certFile and returns its serial
// number, after checking that the CA of the certs directory dir issued it:
// revoking a serial of another CA's certificate would revoke nothing, or
// an unrelated certificate. Errors: ErrNoCertificate, the file system's.
func CertSerial(dir, certFile string) (*big.Int, *x509.Certificate, error) {
	ca, err := LoadCA(dir)
	if err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrNoCertificate, certFile)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrNoCertificate, certFile, err)
	}
	if err := c.CheckSignatureFrom(ca.Cert); err != nil {
		return nil, nil, fmt.Errorf("%w: %s was not issued by the CA in %s: %v", ErrNoCertificate, certFile, dir, err)
	}
	return c.SerialNumber, c, nil
}

// replaceFile writes data to path atomically: a temporary file in the same
// directory, set to mode, synced, then renamed over path.
func replaceFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := f.Chmod(mode); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
