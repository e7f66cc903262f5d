package httpapi_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// TestProbesAndMetricsWithoutClientCert: with client-cert auth on the API
// port, listen_metrics_addr serves /livez, /readyz and /metrics to a client
// without any certificate, over plain HTTP or over its own TLS
// (metrics_cert_file), while the API port still refuses such a client.
func TestProbesAndMetricsWithoutClientCert(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := "plain_http"
		if withTLS {
			name = "own_tls"
		}
		t.Run(name, func(t *testing.T) {
			p := nodetest.NewPKI(t)
			s := nodetest.StartStandalone(t, func(c *config.Config) {
				p.SecureConfig(c)
				c.ListenMetricsAddr = "127.0.0.1:0"
				if withTLS {
					c.MetricsCertFile, c.MetricsKeyFile = p.Path("node-n1.crt"), p.Path("node-n1.key")
				}
			})
			require.Equal(t, withTLS, s.Node.MetricsTLS())
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			served := make(chan error, 1)
			go func() { served <- s.Node.ServeMetrics(ln) }()
			t.Cleanup(func() {
				require.NoError(t, s.Node.Close(ctxT(t))) // Close stops the metrics listener too
				require.ErrorIs(t, <-served, http.ErrServerClosed)
			})

			base, client := "http://"+ln.Addr().String(), &http.Client{Timeout: safety}
			if withTLS {
				base, client = "https://"+ln.Addr().String(), nodetest.TLSHTTPClient(p.ClientTLS(false), true)
			}
			get := func(path string) (int, string) {
				res, err := client.Get(base + path)
				require.NoError(t, err, path)
				defer res.Body.Close()
				body, err := io.ReadAll(res.Body)
				require.NoError(t, err)
				return res.StatusCode, string(body)
			}
			code, body := get("/livez")
			assert.Equal(t, http.StatusOK, code, body)
			require.Eventually(t, func() bool { code, _ := get("/readyz"); return code == http.StatusOK },
				safety, 50*time.Millisecond, "/readyz on the metrics listener")
			code, body = get("/metrics")
			assert.Equal(t, http.StatusOK, code)
			assert.True(t, strings.Contains(body, "ticketd_"), "the node's metrics")

			// The API port still wants a client certificate, probes included.
			_, err = nodetest.TLSHTTPClient(p.ClientTLS(false), true).Get("https://" + s.Addr + "/livez")
			require.Error(t, err, "API port without a client certificate")
			res, err := nodetest.TLSHTTPClient(p.ClientTLS(true), true).Get("https://" + s.Addr + "/metrics")
			require.NoError(t, err)
			res.Body.Close()
			assert.Equal(t, http.StatusNotFound, res.StatusCode, "/metrics left the API port")
		})
	}
}

// TestMetricsOnTheirOwnListener: with listen_metrics_addr set, the API port
// no longer serves /metrics.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	s := nodetest.StartStandalone(t, func(c *config.Config) { c.ListenMetricsAddr = "127.0.0.1:0" })
	res, err := http.Get("http://" + s.Addr + "/metrics")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusNotFound, res.StatusCode, "/metrics left the API port")
	assert.NotNil(t, s.Node.MetricsHandler())
}
