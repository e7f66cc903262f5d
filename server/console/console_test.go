package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/console"
)

func TestHandler(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(console.Path, console.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	tests := []struct {
		name, method, path string
		code               int
		contentType, body  string
	}{
		{name: "index", method: http.MethodGet, path: "/ui/", code: http.StatusOK, contentType: "text/html", body: "<title>ticketd console</title>"},
		{name: "script", method: http.MethodGet, path: "/ui/app.js", code: http.StatusOK, contentType: "javascript", body: "ticketd.token"},
		{name: "style", method: http.MethodGet, path: "/ui/app.css", code: http.StatusOK, contentType: "text/css", body: ".bar"},
		{name: "missing", method: http.MethodGet, path: "/ui/nope.js", code: http.StatusNotFound},
		{name: "post_refused", method: http.MethodPost, path: "/ui/", code: http.StatusMethodNotAllowed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			require.NoError(t, err)
			res, err := srv.Client().Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			require.Equal(t, tc.code, res.StatusCode)
			if tc.code != http.StatusOK {
				return
			}
			require.Contains(t, res.Header.Get("Content-Type"), tc.contentType)
			require.Truef(t, strings.Contains(string(body), tc.body), "%s: no %q in %d bytes", tc.path, tc.body, len(body))
			require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
			require.True(t, strings.HasPrefix(res.Header.Get("Content-Security-Policy"), "default-src 'self'"))
		})
	}
}

// TestPlaceholdersFit: every input's placeholder fits the input at its
// minimum width (app.css: min-width 10rem at the labels' .85rem font, about
// 18 characters after padding), so none is cut off ("if auth is o…").
func TestPlaceholdersFit(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(console.Path, console.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	res, err := srv.Client().Get(srv.URL + "/ui/")
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	const maxChars = 18
	found := 0
	for _, m := range regexp.MustCompile(`placeholder="([^"]*)"`).FindAllStringSubmatch(string(body), -1) {
		found++
		require.LessOrEqualf(t, utf8.RuneCountInString(m[1]), maxChars, "placeholder %q is cut off at the input's minimum width", m[1])
	}
	require.NotZero(t, found, "the console has inputs with placeholders")
}
