package peerlimit_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ticketd/ticketd/backends/internal/peerlimit"
)

// server accepts on a capped loopback listener and keeps what it accepts.
type server struct {
	ln      *peerlimit.Listener
	mu      sync.Mutex
	conns   []net.Conn
	counted map[string]int
	done    chan struct{}
}

func newServer(t *testing.T, cfg peerlimit.Config) *server {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{counted: map[string]int{}, done: make(chan struct{})}
	cfg.Count = func(_, kind string) {
		s.mu.Lock()
		s.counted[kind]++
		s.mu.Unlock()
	}
	s.ln = peerlimit.NewListener(raw, cfg)
	go func() {
		defer close(s.done)
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = s.ln.Close()
		<-s.done
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			_ = c.Close()
		}
	})
	return s
}

func (s *server) accepted() []net.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]net.Conn(nil), s.conns...)
}

func (s *server) count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counted[kind]
}

// dial opens n connections to s and returns them, closed at cleanup.
func dial(t *testing.T, s *server, n int) []net.Conn {
	t.Helper()
	var out []net.Conn
	for range n {
		c, err := net.Dial("tcp", s.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		out = append(out, c)
	}
	return out
}

// closedByServer reports whether the server closed c (a read sees EOF).
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("server neither wrote nor closed within 5s")
	}
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || err != nil
}

// stillOpen reports whether the server kept c open (no EOF within a short read).
func stillOpen(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCaps(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  peerlimit.Config
	}{
		{"total_cap", peerlimit.Config{MaxConns: 5, Grace: time.Hour}},
		{"per_ip_cap", peerlimit.Config{MaxConns: 100, MaxConnsPerIP: 5, Grace: time.Hour}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, tc.cfg)
			kept := dial(t, s, 5)
			waitFor(t, "5 accepted", func() bool { return len(s.accepted()) == 5 })
			extra := dial(t, s, 3)
			for i, c := range extra {
				if !closedByServer(t, c) {
					t.Errorf("connection %d past the cap was not refused", i)
				}
			}
			waitFor(t, "3 refusals counted", func() bool { return s.count("refused") == 3 })
			if got := s.ln.Refused(); got != 3 {
				t.Errorf("Refused() = %d, want 3", got)
			}
			for i, c := range kept {
				if !stillOpen(c) {
					t.Errorf("admitted connection %d was closed", i)
				}
			}
			// A slot freed by a close is taken by the next newcomer.
			_ = s.accepted()[0].Close()
			waitFor(t, "slot freed", func() bool { return s.ln.Open() == 4 })
			dial(t, s, 1)
			waitFor(t, "6th accepted", func() bool { return len(s.accepted()) == 6 })
		})
	}
}

func TestSheddingSparesEstablished(t *testing.T) {
	t.Parallel()
	// Grace 1ns: every unestablished connection is overdue at once.
	s := newServer(t, peerlimit.Config{MaxConns: 4, Grace: time.Nanosecond})
	first := dial(t, s, 4)
	waitFor(t, "4 accepted", func() bool { return len(s.accepted()) == 4 })
	for _, c := range s.accepted()[:2] {
		peerlimit.MarkEstablished(c)
	}
	// Two newcomers shed the two unestablished connections, oldest first.
	dial(t, s, 2)
	waitFor(t, "6 accepted", func() bool { return len(s.accepted()) == 6 })
	if !closedByServer(t, first[2]) || !closedByServer(t, first[3]) {
		t.Error("unestablished connections were not shed")
	}
	for _, c := range s.accepted()[4:] {
		peerlimit.MarkEstablished(c)
	}
	// Now every slot is established: a newcomer is refused, nobody is shed.
	late := dial(t, s, 1)
	if !closedByServer(t, late[0]) {
		t.Error("newcomer admitted past a cap of established peers")
	}
	for i, c := range first[:2] {
		if !stillOpen(c) {
			t.Errorf("established connection %d was shed", i)
		}
	}
	if got := s.count("refused"); got != 1 {
		t.Errorf("refused = %d, want 1", got)
	}
}
