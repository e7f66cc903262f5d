package server_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
)

// rawH2 is a raw HTTP/2 client connection (h2c, prior knowledge) for tests
// of what a node does with a client that reads as it pleases: the
// connection's SETTINGS give every stream the initial flow-control window
// the test chose (0: the node may send a stream's headers but no byte of
// its body), and a stream's window opens only when the test grants it,
// so a stream never granted is a reader that never reads. The connection's
// own window is opened wide, as Go's and gRPC's transports do, so only the
// streams' windows hold anything back. A goroutine reads every frame (and
// answers SETTINGS and PING); await applies them, on the test's goroutine,
// to what each stream received.
type rawH2 struct {
	t    testing.TB
	addr string
	conn net.Conn

	wmu   sync.Mutex // guards fr's writes and enc
	fr    *http2.Framer
	enc   *hpack.Encoder
	block bytes.Buffer

	frames chan rawFrame
	stop   chan struct{}
	done   chan struct{}

	next    uint32 // the next client stream id
	streams map[uint32]*rawStream
	err     error // the connection's read error, once it failed
}

// rawStream is what one stream of a rawH2 received.
type rawStream struct {
	opened  time.Time
	status  string        // :status of the response headers
	data    []byte        // every DATA byte
	ended   bool          // END_STREAM received
	reset   bool          // RST_STREAM received
	code    http2.ErrCode // its error code
	resetAt time.Time
}

// rawFrame is a frame as the reader goroutine hands it on (its data
// copied: the framer reuses its buffer).
type rawFrame struct {
	typ       http2.FrameType
	stream    uint32
	status    string
	data      []byte
	endStream bool
	code      http2.ErrCode
	err       error
}

// dialRawH2 connects to the h2c API at addr with initialWindow as every
// stream's initial flow-control window, and reads the connection. The
// connection is closed, and its reader stopped, when the test ends.
func dialRawH2(t testing.TB, addr string, initialWindow uint32) *rawH2 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	c := newRawH2(t, conn, addr, initialWindow)
	go c.read()
	t.Cleanup(func() {
		close(c.stop)
		_ = conn.Close()
		<-c.done
	})
	return c
}

// newRawH2 starts HTTP/2 on conn, a connection to the h2c API at addr,
// with initialWindow as every stream's initial flow-control window.
// Nothing reads conn until the caller runs c.read; the caller closes conn.
func newRawH2(t testing.TB, conn net.Conn, addr string, initialWindow uint32) *rawH2 {
	t.Helper()
	c := &rawH2{
		t: t, addr: addr, conn: conn, fr: http2.NewFramer(conn, conn),
		frames: make(chan rawFrame, 1024), stop: make(chan struct{}), done: make(chan struct{}),
		next: 1, streams: map[uint32]*rawStream{},
	}
	c.enc = hpack.NewEncoder(&c.block)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_, err := io.WriteString(conn, http2.ClientPreface)
	require.NoError(t, err)
	c.write(func(fr *http2.Framer) error {
		if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: initialWindow}); err != nil {
			return err
		}
		return fr.WriteWindowUpdate(0, 1<<30)
	})
	return c
}

// write runs fn on the framer under the write lock; an error fails the
// test (only from the test's goroutine: the reader's acknowledgements
// ignore theirs).
func (c *rawH2) write(fn func(fr *http2.Framer) error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	require.NoError(c.t, fn(c.fr))
}

// read hands every frame of interest to await until the connection fails
// or the test ends; it acknowledges SETTINGS and answers PINGs itself.
func (c *rawH2) read() {
	defer close(c.done)
	for {
		f, err := c.fr.ReadFrame()
		var rf rawFrame
		switch f := f.(type) {
		case nil:
			rf.err = err
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.wmu.Lock()
				_ = c.fr.WriteSettingsAck()
				c.wmu.Unlock()
			}
			continue
		case *http2.PingFrame:
			if !f.IsAck() {
				c.wmu.Lock()
				_ = c.fr.WritePing(true, f.Data)
				c.wmu.Unlock()
			}
			continue
		case *http2.MetaHeadersFrame:
			rf = rawFrame{typ: http2.FrameHeaders, stream: f.StreamID, status: f.PseudoValue("status"), endStream: f.StreamEnded()}
		case *http2.DataFrame:
			rf = rawFrame{typ: http2.FrameData, stream: f.StreamID, data: bytes.Clone(f.Data()), endStream: f.StreamEnded()}
		case *http2.RSTStreamFrame:
			rf = rawFrame{typ: http2.FrameRSTStream, stream: f.StreamID, code: f.ErrCode}
		case *http2.GoAwayFrame:
			rf = rawFrame{typ: http2.FrameGoAway, code: f.ErrCode}
		default:
			continue
		}
		select {
		case c.frames <- rf:
		case <-c.stop:
			return
		}
		if rf.err != nil {
			return
		}
	}
}

// open starts a POST to path with body as one DATA frame ending the
// request, and returns its stream.
func (c *rawH2) open(path, contentType string, body []byte) uint32 {
	return c.start(path, contentType, body, true)
}

// start starts a POST to path with body as one DATA frame, ending the
// request when end is true (else the request stays open), and returns its
// stream.
func (c *rawH2) start(path, contentType string, body []byte, end bool) uint32 {
	id := c.next
	c.next += 2
	c.streams[id] = &rawStream{opened: time.Now()}
	c.write(func(fr *http2.Framer) error {
		c.block.Reset()
		for _, f := range []hpack.HeaderField{
			{Name: ":method", Value: http.MethodPost}, {Name: ":scheme", Value: "http"},
			{Name: ":authority", Value: c.addr}, {Name: ":path", Value: path},
			{Name: "content-type", Value: contentType}, {Name: "connect-protocol-version", Value: "1"},
		} {
			if err := c.enc.WriteField(f); err != nil {
				return err
			}
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.block.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
		return fr.WriteData(id, end, body)
	})
	return id
}

// openStream calls the streaming procedure at path (the Connect protocol,
// protobuf) with msg (nil: an empty message) and returns its stream.
func (c *rawH2) openStream(path string, msg proto.Message) uint32 {
	var payload []byte
	if msg != nil {
		var err error
		payload, err = proto.Marshal(msg)
		require.NoError(c.t, err)
	}
	envelope := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(payload))) // Connect envelope: flags, length
	return c.open(path, "application/connect+proto", append(envelope, payload...))
}

// grant opens n more bytes of stream id's flow-control window.
func (c *rawH2) grant(id, n uint32) {
	c.write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(id, n) })
}

// unary calls the unary procedure at path (the Connect protocol,
// protobuf) with req on a stream of its own whose window it opens, and
// reads the answer into resp; anything but a 200 answer fails the test.
func (c *rawH2) unary(path string, req, resp proto.Message) {
	c.t.Helper()
	body, err := proto.Marshal(req)
	require.NoError(c.t, err)
	id := c.open(path, "application/proto", body)
	c.grant(id, 1<<20)
	c.await(path, func() bool { return c.streams[id].ended || c.streams[id].reset })
	s := c.streams[id]
	require.False(c.t, s.reset, "%s: stream reset (%v)", path, s.code)
	require.Equal(c.t, "200", s.status, "%s: %s", path, s.data)
	require.NoError(c.t, proto.Unmarshal(s.data, resp))
}

// awaitReset waits until stream id is reset and returns what it got; the
// stream ending otherwise fails the test.
func (c *rawH2) awaitReset(id uint32, what string) *rawStream {
	c.t.Helper()
	c.await(what, func() bool { return c.streams[id].reset || c.streams[id].ended })
	s := c.streams[id]
	require.True(c.t, s.reset, "%s: the stream ended (status %s) instead of being reset", what, s.status)
	return s
}

// await applies frames until done is true; the connection failing
// first, or nothing making done true within safety, fails the test.
func (c *rawH2) await(what string, done func() bool) {
	c.t.Helper()
	timeout := time.NewTimer(safety)
	defer timeout.Stop()
	for !done() {
		require.NoError(c.t, c.err, "%s: the connection failed", what)
		select {
		case f := <-c.frames:
			c.apply(f)
		case <-timeout.C:
			require.FailNow(c.t, "timed out", "%s: not within %v", what, safety)
		}
	}
}

// apply records f in its stream (a read error in c.err).
func (c *rawH2) apply(f rawFrame) {
	if f.err != nil {
		c.err = f.err
		return
	}
	if f.typ == http2.FrameGoAway {
		require.FailNow(c.t, "connection ended", "GOAWAY %v", f.code)
	}
	s := c.streams[f.stream]
	require.NotNil(c.t, s, "a frame on stream %d, which the client never opened", f.stream)
	switch f.typ {
	case http2.FrameHeaders:
		if f.status != "" {
			s.status = f.status
		}
	case http2.FrameData:
		s.data = append(s.data, f.data...)
	case http2.FrameRSTStream:
		s.reset, s.code, s.resetAt = true, f.code, time.Now()
	}
	s.ended = s.ended || f.endStream
}

// connectMessages splits a Connect streaming response body into its
// messages' payloads and, if it came, the end-of-stream message's (JSON);
// a message cut short at the end is left out.
func connectMessages(body []byte) (msgs [][]byte, end []byte) {
	for len(body) >= 5 {
		n := int(binary.BigEndian.Uint32(body[1:5]))
		if len(body) < 5+n {
			break
		}
		if body[0]&0x02 != 0 {
			end = body[5 : 5+n]
		} else {
			msgs = append(msgs, body[5:5+n])
		}
		body = body[5+n:]
	}
	return msgs, end
}

// awaitNoGoroutineIn waits until no goroutine's stack passes through any of
// funcs (as runtime.Stack names them: "server.(*lockService).Watch"), and
// fails the test with those stacks if some still do after safety.
func awaitNoGoroutineIn(t testing.TB, funcs ...string) {
	t.Helper()
	deadline := time.Now().Add(safety)
	for {
		stuck := goroutinesIn(funcs...)
		if len(stuck) == 0 {
			return
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "goroutines still running", "%d after %v:\n%s", len(stuck), safety, strings.Join(stuck, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitGoroutineIn waits until a goroutine's stack passes through one of
// funcs (a handler has started), and fails the test if none does within
// safety.
func awaitGoroutineIn(t testing.TB, funcs ...string) {
	t.Helper()
	deadline := time.Now().Add(safety)
	for len(goroutinesIn(funcs...)) == 0 {
		if time.Now().After(deadline) {
			require.FailNow(t, "no such goroutine", "none in %v within %v", funcs, safety)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goroutinesIn returns the stacks of the goroutines that pass through any
// of funcs.
func goroutinesIn(funcs ...string) []string {
	var in []string
	for _, g := range goroutineStacks() {
		for _, fn := range funcs {
			if strings.Contains(g, fn+"(") {
				in = append(in, g)
				break
			}
		}
	}
	return in
}

// awaitGoroutinesAtMost waits until the process runs at most n goroutines,
// and fails the test with every stack if it still runs more after safety.
func awaitGoroutinesAtMost(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(safety)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			require.FailNow(t, "goroutines left", "%d goroutines, %d before:\n%s", runtime.NumGoroutine(), n, strings.Join(goroutineStacks(), "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goroutineStacks is the stack of every goroutine, one string each.
func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}
