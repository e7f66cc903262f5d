package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/server/config"
)

// DefaultPollInterval is how often Watch looks for changed certificate files.
const DefaultPollInterval = 5 * time.Second

// Reloader holds one endpoint's certificate, key, CA pool and revocation
// list and replaces them on Reload. Handshakes read the current material through
// GetCertificate, GetClientCertificate and Pool, so a renewed certificate or
// CA bundle takes effect on the next handshake without a restart (etcd and
// Consul reload the same way). Safe for concurrent use.
type Reloader struct {
	files config.TLSFiles
	log   *zap.Logger

	mu    sync.RWMutex
	cert  *tls.Certificate
	pool  *x509.CertPool // nil without TrustedCAFile
	rev   *Revocations   // nil without CRLFile
	stamp string         // files' sizes and modification times at the last load
}

// NewReloader loads files (CertFile and KeyFile required; TrustedCAFile
// optional; CRLFile needs TrustedCAFile; the certificate's CN must be
// files.CommonName when that is set). Errors: ErrNoCertificate,
// ErrWrongNode, ErrNoCA, ErrBadCRL, ErrInsecureFile (a key or revocation
// list another user could write), or the file system's, wrapped with the
// file name. log may be nil.
func NewReloader(files config.TLSFiles, log *zap.Logger) (*Reloader, error) {
	if log == nil {
		log = zap.NewNop()
	}
	r := &Reloader{files: files, log: log}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	r.warnStale()
	return r, nil
}

// Reload reads the files again. On an error the previous material stays in
// use and the error is returned.
func (r *Reloader) Reload() error {
	stamp := r.fileStamp()
	cert, err := loadKeyPair(r.files.CertFile, r.files.KeyFile)
	if err != nil {
		return err
	}
	if want := r.files.CommonName; want != "" {
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrNoCertificate, r.files.CertFile, err)
		}
		if got := leaf.Subject.CommonName; got != want {
			return fmt.Errorf("%w: %s names %q but this node's --id is %q; each node needs its own certificate (ticketctl cert create-node --id %s)",
				ErrWrongNode, r.files.CertFile, got, want, want)
		}
	}
	var (
		pool *x509.CertPool
		rev  *Revocations
	)
	if r.files.TrustedCAFile != "" {
		cas, err := loadCACerts(r.files.TrustedCAFile)
		if err != nil {
			return err
		}
		pool = x509.NewCertPool()
		for _, ca := range cas {
			pool.AddCert(ca)
		}
		if r.files.CRLFile != "" {
			if rev, err = loadRevocations(r.files.CRLFile, cas); err != nil {
				return err
			}
		}
	} else if r.files.CRLFile != "" {
		return fmt.Errorf("%w: %s: no trusted CA file to verify it with", ErrBadCRL, r.files.CRLFile)
	}
	r.mu.Lock()
	r.cert, r.pool, r.rev, r.stamp = &cert, pool, rev, stamp
	r.mu.Unlock()
	return nil
}

// loadKeyPair reads a PEM certificate and its private key, refusing a key
// file another local user could write (ErrInsecureFile). Errors:
// ErrNoCertificate, ErrInsecureFile, the file system's.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	keyPEM, err := readCredentialFile("private key", keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: %s: %v", ErrNoCertificate, certFile, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: %s, %s: %v", ErrNoCertificate, certFile, keyFile, err)
	}
	return cert, nil
}

// loadRevocations reads the revocation list path and accepts it only if
// one of cas signed it (ParseRevocations). Errors: ErrBadCRL,
// ErrInsecureFile, the file system's, with the file name.
func loadRevocations(path string, cas []*x509.Certificate) (*Revocations, error) {
	data, err := readCredentialFile("revocation list", path)
	if err != nil {
		return nil, err
	}
	rev, err := ParseRevocations(data, cas)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rev, nil
}

// LoadCAPool reads a PEM CA bundle. Errors: ErrNoCA, or the file system's.
func LoadCAPool(path string) (*x509.CertPool, error) {
	cas, err := loadCACerts(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	return pool, nil
}

// loadCACerts reads the certificates of a PEM CA bundle; blocks that are
// not certificates, or do not parse, are skipped (as
// x509.CertPool.AppendCertsFromPEM does). Errors: ErrNoCA when none is
// left, or the file system's.
func loadCACerts(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	var cas []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			cas = append(cas, c)
		}
	}
	if len(cas) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoCA, path)
	}
	return cas, nil
}

// fileStamp describes the files' current sizes and modification times.
func (r *Reloader) fileStamp() string {
	s := ""
	for _, f := range []string{r.files.CertFile, r.files.KeyFile, r.files.TrustedCAFile, r.files.CRLFile} {
		if f == "" {
			continue
		}
		if fi, err := os.Stat(f); err == nil {
			s += fmt.Sprintf("%s:%d:%d;", f, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return s
}

// Changed reports whether a file's size or modification time differs from
// the last successful load.
func (r *Reloader) Changed() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.fileStamp() != r.stamp
}

// Watch reloads on SIGHUP and when Changed reports a change (checked every
// interval), until ctx ends. A failed reload is logged and the old material
// kept. Run it in its own goroutine.
func (r *Reloader) Watch(ctx context.Context, interval time.Duration) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		case <-tick.C:
			if !r.Changed() {
				continue
			}
		}
		if err := r.Reload(); err != nil {
			r.log.Error("certificate reload failed; keeping the previous certificate", zap.Error(err))
			continue
		}
		r.log.Info("certificates reloaded", zap.String("cert_file", r.files.CertFile))
		r.warnStale()
	}
}

// warnStale logs a revocation list past its NextUpdate: it still revokes
// what it lists, but the CA's newer revocations are not in it.
func (r *Reloader) warnStale() {
	if next := r.Revocations().NextUpdate(); !next.IsZero() && time.Now().After(next) {
		r.log.Warn("revocation list is past its next update; issue a new one (ticketctl cert revoke)",
			zap.String("crl_file", r.files.CRLFile), zap.Time("next_update", next))
	}
}

// Revocations returns the current revocation list (nil without CRLFile:
// nothing revoked).
func (r *Reloader) Revocations() *Revocations {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.rev
}

// CheckRevoked refuses, with an error wrapping ErrRevoked, a handshake
// whose other side presented a certificate the current revocation list
// names. It reads the list at every call, so a reloaded list applies to
// the next handshake.
func (r *Reloader) CheckRevoked(cs tls.ConnectionState) error {
	return r.Revocations().Check(cs.PeerCertificates)
}

// Certificate returns the current certificate and key.
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert
}

// Pool returns the current CA pool (nil without TrustedCAFile).
func (r *Reloader) Pool() *x509.CertPool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.pool
}

// GetCertificate is a tls.Config.GetCertificate returning the current certificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.Certificate(), nil
}

// GetClientCertificate is a tls.Config.GetClientCertificate returning the
// current certificate.
func (r *Reloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.Certificate(), nil
}
