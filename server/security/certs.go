package security

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names inside a certs directory (`ticketctl cert --certs-dir`), as
// `cockroach cert` names them.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// NodeFiles returns the certificate and key file names of node id's
// certificate: node-<id>.crt and node-<id>.key.
func NodeFiles(id string) (cert, key string) {
	return "node-" + id + ".crt", "node-" + id + ".key"
}

// ClientFiles returns the file names of the client certificate of principal
// name: client.<name>.crt and client.<name>.key.
func ClientFiles(name string) (cert, key string) {
	return "client." + name + ".crt", "client." + name + ".key"
}

// KeyPair is a certificate with its private key (ECDSA P-256), parsed and PEM-encoded.
type KeyPair struct {
	// Cert is the parsed certificate.
	Cert *x509.Certificate
	// Key is its private key.
	Key crypto.Signer
	// CertPEM and KeyPEM are the PEM encodings written to files (the key as PKCS #8).
	CertPEM []byte
	KeyPEM  []byte
}

// TLS returns the pair as a tls.Certificate.
func (kp *KeyPair) TLS() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert}
}

// CertOptions describes a certificate to issue.
type CertOptions struct {
	// CommonName is the subject CN: the node id or the client's principal.
	CommonName string
	// Hosts are the DNS names and IP addresses a server certificate is valid for.
	Hosts []string
	// Server and Client set ExtKeyUsageServerAuth and ExtKeyUsageClientAuth.
	Server, Client bool
	// NotBefore and NotAfter bound validity; zero values mean now-1h and now+Validity.
	NotBefore, NotAfter time.Time
}

// How long `ticketctl cert` certificates are valid by default: 5 years for a
// CA, 2 years for node and client certificates (cockroach's are 10 and 5).
const (
	DefaultCAValidity   = 5 * 365 * 24 * time.Hour
	DefaultCertValidity = 2 * 365 * 24 * time.Hour
)

// NewCA creates a self-signed CA certificate valid from one hour ago for validity.
func NewCA(commonName string, validity time.Duration) (*KeyPair, error) {
	now := time.Now()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"ticketd"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, nil)
}

// Issue signs a certificate described by o with the CA ca.
func (ca *KeyPair) Issue(o CertOptions) (*KeyPair, error) {
	if !ca.Cert.IsCA {
		return nil, errors.New("security: issuer is not a CA")
	}
	now := time.Now()
	if o.NotBefore.IsZero() {
		o.NotBefore = now.Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = now.Add(DefaultCertValidity)
	}
	tmpl := &x509.Certificate{
		Subject:   pkix.Name{CommonName: o.CommonName, Organization: []string{"ticketd"}},
		NotBefore: o.NotBefore,
		NotAfter:  o.NotAfter,
		KeyUsage:  x509.KeyUsageDigitalSignature,
	}
	if o.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if o.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return sign(tmpl, ca)
}

// sign creates a fresh key for tmpl and signs it with parent (self-signed when nil).
func sign(tmpl *x509.Certificate, parent *KeyPair) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial: %w", err)
	}
	tmpl.SerialNumber = serial
	issuer, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		issuer, signer = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("create certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// LoadKeyPair reads a PEM certificate and key (a CA's, to issue with).
// Errors: ErrNoCertificate, the file system's.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	tc, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %s, %s: %v", ErrNoCertificate, certFile, keyFile, err)
	}
	signer, ok := tc.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a signing key", ErrNoCertificate, keyFile)
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	return &KeyPair{Cert: tc.Leaf, Key: signer, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// WriteFiles writes the certificate (mode 0644) and the key (mode 0600,
// whatever the umask) into dir, creating dir with mode 0700 if missing. It
// refuses to replace an existing file unless overwrite (ErrExists).
func (kp *KeyPair) WriteFiles(dir, certName, keyName string, overwrite bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certs dir: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{certName, kp.CertPEM, 0o644}, {keyName, kp.KeyPEM, 0o600}} {
		if err := writeFile(filepath.Join(dir, f.name), f.data, f.mode, overwrite); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes data to path with exactly mode (chmod after create, so the
// umask cannot widen or narrow it).
func writeFile(path string, data []byte, mode os.FileMode, overwrite bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !overwrite {
		flags |= os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, mode)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: %s (pass --overwrite to replace it)", ErrExists, path)
	}
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// CreateCA writes a new CA (ca.crt, ca.key) into dir.
func CreateCA(dir string, validity time.Duration, overwrite bool) (*KeyPair, error) {
	ca, err := NewCA("ticketd CA", validity)
	if err != nil {
		return nil, err
	}
	return ca, ca.WriteFiles(dir, CACertFile, CAKeyFile, overwrite)
}

// LoadCA reads the CA of dir (ca.crt, ca.key).
func LoadCA(dir string) (*KeyPair, error) {
	return LoadKeyPair(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile))
}

// CreateNode writes a node certificate signed by dir's CA: CN = id, valid
// for hosts, usable as server and client (peers dial each other;
// forwarding presents it). Files are NodeFiles(id). An empty id is refused
// (ErrWrongNode): peer identity is membership, so every node has a
// certificate of its own.
func CreateNode(dir, id string, hosts []string, validity time.Duration, overwrite bool) (*KeyPair, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: a node certificate needs the node's id as its CN", ErrWrongNode)
	}
	ca, err := LoadCA(dir)
	if err != nil {
		return nil, err
	}
	kp, err := ca.Issue(CertOptions{CommonName: id, Hosts: hosts, Server: true, Client: true, NotAfter: time.Now().Add(validity)})
	if err != nil {
		return nil, err
	}
	cert, key := NodeFiles(id)
	return kp, kp.WriteFiles(dir, cert, key, overwrite)
}

// CreateClient writes a client certificate signed by dir's CA, CN = name
// (the principal), client use only. Files are ClientFiles(name).
func CreateClient(dir, name string, validity time.Duration, overwrite bool) (*KeyPair, error) {
	if name == "" {
		return nil, errors.New("security: client certificate needs a name")
	}
	ca, err := LoadCA(dir)
	if err != nil {
		return nil, err
	}
	kp, err := ca.Issue(CertOptions{CommonName: name, Client: true, NotAfter: time.Now().Add(validity)})
	if err != nil {
		return nil, err
	}
	cert, key := ClientFiles(name)
	return kp, kp.WriteFiles(dir, cert, key, overwrite)
}
