package security

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// Revocations is the set of certificates revoked by one or more
// certificate revocation lists (RFC 5280 section 5), each signed by a
// trusted CA: what --client-crl-file and --peer-crl-file load (etcd's
// names and behaviour: a listed certificate is refused at the TLS
// handshake). Immutable once parsed; safe for concurrent use.
type Revocations struct {
	revoked    map[revokedKey]bool
	nextUpdate time.Time // the earliest NextUpdate of the lists (zero: none set)
}

// revokedKey names a certificate as a CRL does: by its issuer's subject
// and its serial number, unique per issuer (RFC 5280 section 4.1.2.2).
type revokedKey struct {
	issuer string // raw DER subject of the issuing CA
	serial string // decimal serial number
}

// ParseRevocations parses data, one DER revocation list or any number of
// PEM "X509 CRL" blocks, and accepts it only if every list is signed by
// one of cas (the trusted CA bundle of the same endpoint): a list from any
// other issuer could not be told from a forgery. Expiry (NextUpdate) is not
// enforced: a stale list still revokes what it names, which is safer than
// dropping it; Reloader logs a stale one. Errors wrap ErrBadCRL.
func ParseRevocations(data []byte, cas []*x509.Certificate) (*Revocations, error) {
	ders, err := crlBlocks(data)
	if err != nil {
		return nil, err
	}
	r := &Revocations{revoked: map[revokedKey]bool{}}
	for i, der := range ders {
		rl, err := x509.ParseRevocationList(der)
		if err != nil {
			return nil, fmt.Errorf("%w: list %d: %v", ErrBadCRL, i+1, err)
		}
		if err := checkCRLIssuer(rl, cas); err != nil {
			return nil, fmt.Errorf("%w: list %d: %v", ErrBadCRL, i+1, err)
		}
		for _, e := range rl.RevokedCertificateEntries {
			r.revoked[revokedKey{issuer: string(rl.RawIssuer), serial: e.SerialNumber.String()}] = true
		}
		if !rl.NextUpdate.IsZero() && (r.nextUpdate.IsZero() || rl.NextUpdate.Before(r.nextUpdate)) {
			r.nextUpdate = rl.NextUpdate
		}
	}
	return r, nil
}

// crlBlocks splits data into DER revocation lists: the PEM "X509 CRL"
// blocks of a PEM file, or data itself when it is not PEM. Errors wrap
// ErrBadCRL.
func crlBlocks(data []byte) ([][]byte, error) {
	if !bytes.Contains(data, []byte("-----BEGIN")) {
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, fmt.Errorf("%w: empty file", ErrBadCRL)
		}
		return [][]byte{data}, nil
	}
	var out [][]byte
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "X509 CRL" {
			return nil, fmt.Errorf("%w: PEM block %q, want \"X509 CRL\"", ErrBadCRL, b.Type)
		}
		out = append(out, b.Bytes)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no PEM \"X509 CRL\" block", ErrBadCRL)
	}
	return out, nil
}

// checkCRLIssuer finds the CA of cas that issued rl (same subject) and
// checks rl's signature with its key (x509.RevocationList.CheckSignatureFrom
// also requires the CA to be allowed to sign CRLs).
func checkCRLIssuer(rl *x509.RevocationList, cas []*x509.Certificate) error {
	var last error
	for _, ca := range cas {
		if !bytes.Equal(ca.RawSubject, rl.RawIssuer) {
			continue
		}
		if last = rl.CheckSignatureFrom(ca); last == nil {
			return nil
		}
	}
	if last != nil {
		return fmt.Errorf("signature does not verify with the trusted CA %q: %v", rl.Issuer.CommonName, last)
	}
	return fmt.Errorf("issuer %q is not a trusted CA", rl.Issuer.String())
}

// Check returns an error wrapping ErrRevoked when a certificate of chain
// (the certificates the other side presented, leaf first) is listed. A nil
// Revocations revokes nothing.
func (r *Revocations) Check(chain []*x509.Certificate) error {
	if r == nil {
		return nil
	}
	for _, c := range chain {
		if r.IsRevoked(c.RawIssuer, c.SerialNumber) {
			return fmt.Errorf("%w: %q (serial %s)", ErrRevoked, c.Subject.CommonName, c.SerialNumber)
		}
	}
	return nil
}

// IsRevoked reports whether the certificate of serial number serial issued
// by the CA of raw subject issuer is listed.
func (r *Revocations) IsRevoked(issuer []byte, serial *big.Int) bool {
	if r == nil {
		return false
	}
	return r.revoked[revokedKey{issuer: string(issuer), serial: serial.String()}]
}

// Len is the number of revoked certificates.
func (r *Revocations) Len() int {
	if r == nil {
		return 0
	}
	return len(r.revoked)
}

// NextUpdate is the earliest NextUpdate of the lists (zero when none has one).
func (r *Revocations) NextUpdate() time.Time {
	if r == nil {
		return time.Time{}
	}
	return r.nextUpdate
}
