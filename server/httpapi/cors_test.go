package httpapi_test

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

const pageOrigin = "https://console.example.com"

func TestCORS(t *testing.T) {
	s := nodetest.StartStandalone(t, func(c *config.Config) { c.CORSAllowedOrigins = []string{pageOrigin} })
	off := nodetest.StartStandalone(t, nil)
	url := "/ticket.v1.LockService/GetLock"

	t.Run("preflight_answered", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodOptions, "http://"+s.Addr+url, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", pageOrigin)
		req.Header.Set("Access-Control-Request-Method", http.MethodPost)
		req.Header.Set("Access-Control-Request-Headers", "authorization,connect-protocol-version,content-type") // sorted, as browsers send it
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Less(t, res.StatusCode, 300)
		assert.Equal(t, pageOrigin, res.Header.Get("Access-Control-Allow-Origin"))
		allowed := strings.ToLower(res.Header.Get("Access-Control-Allow-Headers"))
		assert.Contains(t, allowed, "connect-protocol-version")
		assert.Contains(t, allowed, "authorization", "browser clients send bearer tokens")
	})
	t.Run("preflight_other_origin_not_allowed", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodOptions, "http://"+s.Addr+url, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", "https://evil.example.net")
		req.Header.Set("Access-Control-Request-Method", http.MethodPost)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Empty(t, res.Header.Get("Access-Control-Allow-Origin"))
	})
	t.Run("cross_origin_connect_call", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, "http://"+s.Addr+url, strings.NewReader(`{"key":"k"}`))
		require.NoError(t, err)
		req.Header.Set("Origin", pageOrigin)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Connect-Protocol-Version", "1")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode)
		assert.Equal(t, pageOrigin, res.Header.Get("Access-Control-Allow-Origin"))
	})
	t.Run("cross_origin_grpc_web_call", func(t *testing.T) {
		msg, err := proto.Marshal(&ticketv1.GetLockRequest{Key: "k"})
		require.NoError(t, err)
		var frame bytes.Buffer
		frame.WriteByte(0)
		_ = binary.Write(&frame, binary.BigEndian, uint32(len(msg)))
		frame.Write(msg)
		req, err := http.NewRequest(http.MethodPost, "http://"+s.Addr+url, &frame)
		require.NoError(t, err)
		req.Header.Set("Origin", pageOrigin)
		req.Header.Set("Content-Type", "application/grpc-web+proto")
		req.Header.Set("X-Grpc-Web", "1")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode)
		assert.Equal(t, pageOrigin, res.Header.Get("Access-Control-Allow-Origin"))
		assert.Contains(t, res.Header.Get("Access-Control-Expose-Headers"), "Grpc-Status")
	})
	t.Run("default_off", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodOptions, "http://"+off.Addr+url, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", pageOrigin)
		req.Header.Set("Access-Control-Request-Method", http.MethodPost)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Empty(t, res.Header.Get("Access-Control-Allow-Origin"))
	})
}
