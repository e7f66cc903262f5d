package peerlimit

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Defaults of the optional Config fields.
const (
	// DefaultGrace is Config.Grace when zero: a connection not established
	// within a second (a TLS handshake on loopback or a LAN takes
	// milliseconds) may be closed to admit a newcomer.
	DefaultGrace = time.Second
	// DefaultLogEvery is Config.LogEvery when zero.
	DefaultLogEvery = time.Second
)

// Config configures NewListener.
type Config struct {
	// MaxConns caps the open accepted connections in total; <= 0: no cap.
	MaxConns int
	// MaxConnsPerIP caps the open accepted connections from one remote IP;
	// <= 0: no cap.
	MaxConnsPerIP int
	// Grace is how long a connection must have been open, not yet
	// established, before it may be closed to admit a newcomer. Default
	// DefaultGrace.
	Grace time.Duration
	// LogEvery is the least time between two "refused" log lines. Default
	// DefaultLogEvery.
	LogEvery time.Duration
	// Log receives the refusals, rate-limited; nil: zap.NewNop().
	Log *zap.Logger
	// Count, if set, is called with (remote address, "refused") for every
	// refused connection (backends.PeerObserver.PeerTransportError). It must
	// not block.
	Count func(peer, kind string)
}

// Listener is a net.Listener whose Accept admits connections within the
// caps of its Config and refuses (closes) the others; see the package
// comment. Safe for concurrent use.
type Listener struct {
	net.Listener
	cfg Config

	mu    sync.Mutex
	conns map[*Conn]struct{}
	perIP map[string]int

	logMu      sync.Mutex
	lastLog    time.Time
	suppressed int
	refused    atomic.Int64
}

// NewListener wraps l with the caps of cfg.
func NewListener(l net.Listener, cfg Config) *Listener {
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = DefaultLogEvery
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return &Listener{Listener: l, cfg: cfg, conns: map[*Conn]struct{}{}, perIP: map[string]int{}}
}

// Accept returns the next admitted connection, a *Conn. Refused ones are
// closed and counted without returning; errors are the wrapped listener's.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &Conn{Conn: nc, l: l, ip: remoteIP(nc), opened: time.Now()}
		if l.admit(c) {
			return c, nil
		}
		_ = nc.Close()
		l.refuse(nc.RemoteAddr().String())
	}
}

// Open returns the number of admitted connections still open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Refused returns the number of connections refused since NewListener.
func (l *Listener) Refused() int64 { return l.refused.Load() }

// admit takes a slot for c, closing an overdue unestablished connection
// when a cap is reached; false when nothing may be closed.
func (l *Listener) admit(c *Conn) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.MaxConnsPerIP > 0 && l.perIP[c.ip] >= l.cfg.MaxConnsPerIP {
		if !l.shedLocked(now, c.ip) {
			return false
		}
	}
	if l.cfg.MaxConns > 0 && len(l.conns) >= l.cfg.MaxConns {
		if !l.shedLocked(now, "") {
			return false
		}
	}
	l.conns[c] = struct{}{}
	l.perIP[c.ip]++
	return true
}

// shedLocked closes the oldest unestablished connection open longer than
// Grace, from ip (any IP when ip is ""); false if there is none. l.mu held.
func (l *Listener) shedLocked(now time.Time, ip string) bool {
	var victim *Conn
	for c := range l.conns {
		if c.established.Load() || now.Sub(c.opened) < l.cfg.Grace || (ip != "" && c.ip != ip) {
			continue
		}
		if victim == nil || c.opened.Before(victim.opened) {
			victim = c
		}
	}
	if victim == nil {
		return false
	}
	l.dropLocked(victim)
	go victim.Conn.Close() // a TLS conn may be mid-handshake: never block Accept
	return true
}

// dropLocked frees c's slot; false if it had none. l.mu held.
func (l *Listener) dropLocked(c *Conn) bool {
	if _, ok := l.conns[c]; !ok {
		return false
	}
	delete(l.conns, c)
	if l.perIP[c.ip]--; l.perIP[c.ip] <= 0 {
		delete(l.perIP, c.ip)
	}
	return true
}

func (l *Listener) release(c *Conn) {
	l.mu.Lock()
	l.dropLocked(c)
	l.mu.Unlock()
}

// refuse counts and logs (rate-limited) one refused connection from remote.
func (l *Listener) refuse(remote string) {
	l.refused.Add(1)
	if l.cfg.Count != nil {
		l.cfg.Count(remote, "refused")
	}
	l.logMu.Lock()
	now := time.Now()
	if now.Sub(l.lastLog) < l.cfg.LogEvery {
		l.suppressed++
		l.logMu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.lastLog, l.suppressed = now, 0
	l.logMu.Unlock()
	l.cfg.Log.Warn("refused peer connection: connection limit reached",
		zap.String("remote", remote), zap.Int("max_conns", l.cfg.MaxConns),
		zap.Int("max_conns_per_ip", l.cfg.MaxConnsPerIP), zap.Int("refused_since_last_log", suppressed))
}

// remoteIP is c's remote IP as a string ("" when not TCP).
func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return ""
	}
	return host
}

// Conn is one admitted connection; Close gives its slot back.
type Conn struct {
	net.Conn
	l           *Listener
	ip          string
	opened      time.Time
	established atomic.Bool
	closeOnce   sync.Once
}

// Close closes the connection and frees its slot.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { c.l.release(c) })
	return err
}

// MarkEstablished marks c as a peer that has proved itself (TLS handshake
// complete, or a request answered): it is never closed to admit a
// newcomer. c may be the *Conn an Accept returned or any connection
// wrapping it that has a NetConn() net.Conn method (*tls.Conn) or an
// Unwrap() net.Conn method; other connections are ignored.
func MarkEstablished(c net.Conn) {
	for i := 0; c != nil && i < 8; i++ {
		switch v := c.(type) {
		case *Conn:
			v.established.Store(true)
			return
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		case interface{ Unwrap() net.Conn }:
			c = v.Unwrap()
		default:
			return
		}
	}
}
