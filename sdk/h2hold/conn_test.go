package h2hold

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// safetyBound bounds every wait of these tests: long enough for a busy
// machine, and never the expected time of anything.
const safetyBound = 30 * time.Second

// frame makes an HTTP/2 frame of payload bytes (RFC 9113 §4.1).
func frame(typ, flags byte, stream uint32, payload int) []byte {
	p := make([]byte, frameHeaderLen+payload)
	p[0], p[1], p[2] = byte(payload>>16), byte(payload>>8), byte(payload)
	p[3], p[4] = typ, flags
	p[5], p[6], p[7], p[8] = byte(stream>>24), byte(stream>>16), byte(stream>>8), byte(stream)
	return p
}

// TestLoneHeaders: only a whole HEADERS frame of an odd stream, with
// END_HEADERS and without END_STREAM, is held.
func TestLoneHeaders(t *testing.T) {
	assert.True(t, LoneHeaders(frame(frameHeaders, flagEndHeaders, 1, 12)))
	assert.False(t, LoneHeaders(frame(frameHeaders, flagEndHeaders|flagEndStream, 1, 12)), "ends its stream: nothing follows")
	assert.False(t, LoneHeaders(frame(frameHeaders, 0, 1, 12)), "CONTINUATION follows")
	assert.False(t, LoneHeaders(frame(frameHeaders, flagEndHeaders, 2, 12)), "even stream")
	assert.False(t, LoneHeaders(frame(0x0, flagEndHeaders, 1, 12)), "DATA")
	assert.False(t, LoneHeaders(append(frame(frameHeaders, flagEndHeaders, 1, 12), 0)), "more than one frame")
	assert.False(t, LoneHeaders(frame(frameHeaders, flagEndHeaders, 1, 12)[:15]), "a partial frame")
	assert.False(t, LoneHeaders([]byte("HTTP/1.1 200 OK\r\n")))
}

// recordingConn is a net.Conn below the hold that records its writes and
// write deadlines, reads the HTTP/2 preface (a client's first bytes, as a
// server reads them), and fails writes once failing is set.
type recordingConn struct {
	net.Conn // nil: only the methods below are used
	mu       sync.Mutex
	log      []string // "write <bytes>" and "deadline set"/"deadline cleared", in order
	written  []byte   // every byte written, in order
	failing  bool
}

func (c *recordingConn) Read(p []byte) (int, error) { return copy(p, preface), nil }

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing {
		return 0, errors.New("broken pipe")
	}
	c.log = append(c.log, fmt.Sprintf("write %x", p))
	c.written = append(c.written, p...)
	return len(p), nil
}

func (c *recordingConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.IsZero() {
		c.log = append(c.log, "deadline cleared")
	} else {
		c.log = append(c.log, "deadline set")
	}
	return nil
}

func (c *recordingConn) Close() error { return nil }

func (c *recordingConn) entries() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

func (c *recordingConn) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.written)
}

// TestHoldTimerWrite: a held HEADERS frame that nothing follows is written
// alone by the timer under the connection's write bound; the next write
// shares that bound; and once a timer's write has failed, every later
// write fails with that error.
func TestHoldTimerWrite(t *testing.T) {
	headers := frame(frameHeaders, flagEndHeaders, 1, 1)
	data := frame(0x0, flagEndStream, 1, 1)
	raw := &recordingConn{}
	c := Server(raw, Config{Hold: time.Millisecond, WriteLimit: time.Minute})
	_, err := c.Read(make([]byte, 64))
	require.NoError(t, err)

	n, err := c.Write(headers)
	require.NoError(t, err)
	assert.Equal(t, len(headers), n)
	require.Eventually(t, func() bool { return len(raw.entries()) == 2 }, safetyBound, time.Millisecond,
		"the timer writes the held frame")
	assert.Equal(t, []string{"deadline set", fmt.Sprintf("write %x", headers)}, raw.entries())

	n, err = c.Write(data)
	require.NoError(t, err)
	assert.Equal(t, len(data), n)
	assert.Equal(t, []string{fmt.Sprintf("write %x", data)}, raw.entries()[2:],
		"a write within WriteLimit/rearmAfter of the last setting shares it")

	raw.mu.Lock()
	raw.failing = true
	raw.mu.Unlock()
	_, err = c.Write(headers)
	require.NoError(t, err, "held: nothing written yet")
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err != nil
	}, safetyBound, time.Millisecond, "the timer's write fails")
	_, err = c.Write(data)
	assert.ErrorContains(t, err, "broken pipe")
}

// TestWhichConnectionsHold: a server's connection holds once its first
// read was the preface, a client's once its first write was; a client's
// connection whose first write is something else (a TLS ClientHello, an
// HTTP/1.1 request) never holds, nor does a server's before its first
// read.
func TestWhichConnectionsHold(t *testing.T) {
	headers := frame(frameHeaders, flagEndHeaders, 1, 4)
	data := frame(0x0, flagEndStream, 1, 4)
	writes := func(c *Conn, raw *recordingConn, first []byte) int {
		if first != nil {
			_, err := c.Write(first)
			require.NoError(t, err)
		}
		before := len(raw.entries())
		for _, p := range [][]byte{headers, data} {
			_, err := c.Write(p)
			require.NoError(t, err)
		}
		return len(raw.entries()) - before
	}
	hold := Config{Hold: time.Minute}

	raw := &recordingConn{}
	c := Client(raw, hold)
	assert.Equal(t, 1, writes(c, raw, append(slices.Clone(preface), frame(0x4, 0, 0, 0)...)), "client, h2c")

	raw = &recordingConn{}
	c = Client(raw, hold)
	assert.Equal(t, 2, writes(c, raw, []byte{0x16, 0x03, 0x01, 0x00, 0x05}), "client, TLS: the first write is a ClientHello")

	raw = &recordingConn{}
	c = Server(raw, hold)
	assert.Equal(t, 2, writes(c, raw, nil), "server before its first read")
	_, err := c.Read(make([]byte, 64))
	require.NoError(t, err)
	assert.Equal(t, 1, writes(c, raw, nil), "server, h2c")
}

// TestEveryByteInOrder: whatever a connection is given to write, frames
// that are held or not, whole or cut, with the timer writing some held
// frames alone, comes out below it byte for byte in the order it was
// written, on both sides.
func TestEveryByteInOrder(t *testing.T) {
	for seed := range uint64(200) {
		rng := mrand.New(mrand.NewPCG(seed, 7))
		raw := &recordingConn{}
		cfg := Config{Hold: time.Duration(rng.IntN(50)) * time.Microsecond}
		var c *Conn
		var want []byte
		if seed%2 == 0 {
			c = Client(raw, cfg)
			_, err := c.Write(preface)
			require.NoError(t, err)
			want = slices.Clone(preface)
		} else {
			c = Server(raw, cfg)
			_, err := c.Read(make([]byte, 64))
			require.NoError(t, err)
		}
		for range 50 {
			var p []byte
			switch rng.IntN(4) {
			case 0:
				p = frame(frameHeaders, flagEndHeaders, uint32(2*rng.IntN(100)+1), rng.IntN(200))
			case 1:
				p = frame(0x0, byte(rng.IntN(2)), uint32(2*rng.IntN(100)+1), rng.IntN(20_000))
			case 2:
				p = frame(byte(rng.IntN(10)), byte(rng.IntN(256)), uint32(rng.IntN(200)), rng.IntN(100))
			default:
				p = frame(frameHeaders, flagEndHeaders, 1, 20+rng.IntN(100))[:rng.IntN(20)]
			}
			for i := range p[min(len(p), frameHeaderLen):] {
				p[frameHeaderLen+i] = byte(rng.Uint32())
			}
			n, err := c.Write(p)
			require.NoError(t, err)
			require.Equal(t, len(p), n)
			want = append(want, p...)
			if rng.IntN(8) == 0 {
				time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond) // lets the timer write a held frame alone, or not
			}
		}
		_, err := c.Write(frame(0x0, flagEndStream, 1, 1)) // writes a frame still held
		require.NoError(t, err)
		want = append(want, frame(0x0, flagEndStream, 1, 1)...)
		require.True(t, bytes.Equal(want, raw.bytes()), "seed %d: the bytes below the hold differ from those written", seed)
	}
}

// TestWriteBoundOwned: on an HTTP/2 connection with a WriteLimit the Conn
// sets the write deadline itself, once for writes that follow each other
// within WriteLimit/rearmAfter and again after that, and the deadlines
// net/http's HTTP/2 server sets and clears around every write
// (WriteByteTimeout) do not reach the connection; on a connection that is
// not HTTP/2 they do.
func TestWriteBoundOwned(t *testing.T) {
	data := frame(0x0, flagEndStream, 1, 1)
	raw := &recordingConn{}
	c := Server(raw, Config{WriteLimit: time.Minute})
	_, err := c.Read(make([]byte, 64))
	require.NoError(t, err)
	for range 10 {
		require.NoError(t, c.SetWriteDeadline(time.Now().Add(time.Minute)))
		_, err := c.Write(data)
		require.NoError(t, err)
		require.NoError(t, c.SetWriteDeadline(time.Time{}))
	}
	want := []string{"deadline set"}
	for range 10 {
		want = append(want, fmt.Sprintf("write %x", data))
	}
	assert.Equal(t, want, raw.entries())

	c.mu.Lock()
	c.armed = c.armed.Add(-time.Minute) // as if the last setting were a minute old
	c.mu.Unlock()
	_, err = c.Write(data)
	require.NoError(t, err)
	assert.Equal(t, []string{"deadline set", fmt.Sprintf("write %x", data)}, raw.entries()[len(want):],
		"a stale deadline is set again before the write")

	plainRaw := &recordingConn{}
	plain := Server(plainRaw, Config{WriteLimit: time.Minute})
	require.NoError(t, plain.SetWriteDeadline(time.Now().Add(time.Second)))
	require.NoError(t, plain.SetWriteDeadline(time.Time{}))
	assert.Equal(t, []string{"deadline set", "deadline cleared"}, plainRaw.entries(), "undecided: passed on")
}

// TestStalledWriteCut: a write to an HTTP/2 connection whose peer reads
// nothing fails once WriteLimit passes without progress, with no deadline
// set from above.
func TestStalledWriteCut(t *testing.T) {
	server, client := net.Pipe()
	defer func() { _ = client.Close() }()
	c := Server(server, Config{WriteLimit: 20 * time.Millisecond})
	defer func() { _ = c.Close() }()
	go func() { _, _ = client.Write(preface) }()
	_, err := io.ReadFull(c, make([]byte, len(preface)))
	require.NoError(t, err)
	require.True(t, c.ownsWriteDeadline())
	done := make(chan error, 1)
	go func() {
		_, err := c.Write(frame(0x0, 0, 1, 1024))
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	case <-time.After(safetyBound):
		t.Fatal("a write nobody reads was not cut")
	}
}
