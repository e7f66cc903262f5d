package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/security"
)

// TestMakeRunPeersSpeakMutualTLS runs scripts/cluster.sh, what `make run`
// starts, on free ports and checks what it promises: the client API is
// plaintext on loopback (the README's curl line acquires a lock), while
// the peer port refuses a plaintext peer (hashicorp's TCP transport, etcd's
// h2c) and a TLS client without a certificate, and answers mutual TLS with
// a certificate of its own node (CN = its id) made under DATA/certs/. The
// ticketctl command it prints, on these non-default addresses, names them.
func TestMakeRunPeersSpeakMutualTLS(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	root := repoRoot(t)
	ticketd, err := buildTicketd()
	require.NoError(t, err)
	ctl := ticketctlBin(t)
	for _, backend := range []string{"hashicorp", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel() // its own ports and data dir: beside the other backend
			data := filepath.Join(t.TempDir(), "data")
			api, peer := ticketdtest.FreeAddrs(t, 3), ticketdtest.FreeAddrs(t, 3)
			_, out, _ := startClusterScript(t, root, data, append(clusterScriptEnv(data, ticketd, ctl, api, peer, nil), "BACKEND="+backend))

			// The README's curl line, on the plaintext client API.
			var body []byte
			require.Eventually(t, func() bool {
				resp, err := http.Post("http://"+api[0]+"/ticket.v1.LockService/Acquire", "application/json",
					strings.NewReader(`{"key":"orders/42","leaseMs":"60000"}`))
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				body, _ = io.ReadAll(resp.Body)
				return resp.StatusCode == http.StatusOK
			}, 60*time.Second, 100*time.Millisecond, "Acquire over the plaintext API; script output:\n%s", out)
			require.Contains(t, string(body), `"token"`)

			// The "Try" lines name these nodes for ticketctl, whose
			// default endpoints are the default API_ADDRS; the command
			// they print reaches the cluster.
			export := "export TICKETD_ENDPOINTS=" + strings.Join(api, ",")
			require.Eventually(t, func() bool { return strings.Contains(out.String(), export) },
				60*time.Second, 100*time.Millisecond, "script output:\n%s", out)
			status := exec.Command(ctl, "status")
			status.Env = append(os.Environ(), strings.TrimPrefix(export, "export "))
			got, err := status.CombinedOutput()
			require.NoError(t, err, "ticketctl status as the script says:\n%s", got)

			// Plaintext on the peer port: refused.
			require.Error(t, plaintextPeer(t, backend, peer[1], "n2"), "a plaintext peer was answered")

			// TLS without a client certificate: refused at the handshake.
			pool := x509.NewCertPool()
			caPEM, err := os.ReadFile(filepath.Join(data, "certs", security.CACertFile))
			require.NoError(t, err)
			require.True(t, pool.AppendCertsFromPEM(caPEM))
			require.Error(t, tlsHandshake(peer[1], &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}), "a peer without a certificate was let in")

			// Mutual TLS with n1's certificate: n2 answers with its own.
			crt, key := security.NodeFiles("n1")
			pair, err := tls.LoadX509KeyPair(filepath.Join(data, "certs", crt), filepath.Join(data, "certs", key))
			require.NoError(t, err)
			cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{pair}}
			c, err := tls.Dial("tcp", peer[1], cfg)
			require.NoError(t, err)
			defer c.Close()
			require.Equal(t, "n2", c.ConnectionState().PeerCertificates[0].Subject.CommonName)
		})
	}
}

// plaintextPeer speaks backend's peer protocol without TLS to the node id at
// addr: a RequestVote for term 0 (hashicorp), a batch POSTed over h2c
// (etcd). nil when the node answered.
func plaintextPeer(t *testing.T, backend, addr, id string) error {
	if backend == "hashicorp" {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
		require.NoError(t, err)
		defer func() {
			tr.CloseStreams()
			_ = tr.Close()
		}()
		req := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte("127.0.0.1:1")}}
		return tr.RequestVote(raft.ServerID(id), raft.ServerAddress(addr), req, &raft.RequestVoteResponse{})
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	rt := &http.Transport{Protocols: &p}
	defer rt.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/raft/v1/messages", bytes.NewReader(nil))
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// tlsHandshake completes a TLS handshake with addr and one read, so that
// a refusal of the client certificate (sent after the client's side of a
// TLS 1.3 handshake is done) is seen.
func tlsHandshake(addr string, cfg *tls.Config) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	return err
}

// startClusterScript starts scripts/cluster.sh (what `make run` runs) under
// root with env, in a process group of its own, and returns once it has
// printed its banner (the three nodes are up): the script, its output, and
// a channel closed when it exits. A script still running when the test
// ends is stopped with SIGTERM (it stops its nodes), its group with SIGKILL
// after 30 s; on failure the nodes' logs under data are logged.
func startClusterScript(t *testing.T, root, data string, env []string) (cmd *exec.Cmd, out *syncBuffer, done <-chan struct{}) {
	t.Helper()
	cmd = exec.Command("bash", filepath.Join(root, "scripts", "cluster.sh"))
	cmd.Env = env
	out = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited: // stopped by the test; its group id may be another's by now
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM) // it traps TERM and INT alike: stops its nodes
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		}
		if t.Failed() {
			t.Logf("cluster.sh output:\n%s", out)
			for _, id := range []string{"n1", "n2", "n3"} {
				log, _ := os.ReadFile(filepath.Join(data, id+".log"))
				t.Logf("%s.log:\n%s", id, log)
			}
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "stops all three") }, 90*time.Second, 100*time.Millisecond,
		"cluster.sh did not start:\n%s", out)
	return cmd, out, exited
}

// buildTicketd builds the ticketd binary once per test process.
var buildTicketd = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "ticketd-e2e-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "ticketd")
	if out, err := exec.Command("go", "build", "-o", path, "github.com/ticketd/ticketd/server/cmd/ticketd").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ticketd: %v\n%s", err, out)
	}
	return path, nil
})

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
