package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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

// Reloader holds one endpoint's certificate, key and CA pool and replaces
// them on Reload. Handshakes read the current material through
// GetCertificate, GetClientCertificate and Pool, so a renewed certificate or
// CA bundle takes effect on the next handshake without a restart (etcd and
// Consul reload the same way). Safe for concurrent use.
type Reloader struct {
	files config.TLSFiles
	log   *zap.Logger

	mu    sync.RWMutex
	cert  *tls.Certificate
	pool  *x509.CertPool // nil without TrustedCAFile
	stamp string         // files' sizes and modification times at the last load
}

// NewReloader loads files (CertFile and KeyFile required; TrustedCAFile
// optional; the certificate's CN must be files.CommonName when that is
// set). Errors: ErrNoCertificate, ErrWrongNode, ErrNoCA, or the file
// system's, wrapped with the file name. log may be nil.
func NewReloader(files config.TLSFiles, log *zap.Logger) (*Reloader, error) {
	if log == nil {
		log = zap.NewNop()
	}
	r := &Reloader{files: files, log: log}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again. On an error the previous material stays in
// use and the error is returned.
func (r *Reloader) Reload() error {
	stamp := r.fileStamp()
	cert, err := tls.LoadX509KeyPair(r.files.CertFile, r.files.KeyFile)
	if err != nil {
		return fmt.Errorf("%w: %s, %s: %v", ErrNoCertificate, r.files.CertFile, r.files.KeyFile, err)
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
	var pool *x509.CertPool
	if r.files.TrustedCAFile != "" {
		if pool, err = LoadCAPool(r.files.TrustedCAFile); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.cert, r.pool, r.stamp = &cert, pool, stamp
	r.mu.Unlock()
	return nil
}

// LoadCAPool reads a PEM CA bundle. Errors: ErrNoCA, or the file system's.
func LoadCAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w in %s", ErrNoCA, path)
	}
	return pool, nil
}

// fileStamp describes the files' current sizes and modification times.
func (r *Reloader) fileStamp() string {
	s := ""
	for _, f := range []string{r.files.CertFile, r.files.KeyFile, r.files.TrustedCAFile} {
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
	}
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
