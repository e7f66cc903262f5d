package console

import (
	"embed"
	"io/fs"
	"net/http"
)

// Path is where the console is mounted on a node's API port, with its
// trailing slash (an http.ServeMux subtree pattern).
const Path = "/ui/"

//go:embed dist
var dist embed.FS

// files is dist/ as the root of the served tree.
var files = func() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic("console: embedded dist missing: " + err.Error()) // cannot happen: dist is embedded above
	}
	return sub
}()

// Handler serves the console's files under Path (index.html for Path
// itself). GET and HEAD only; the answers carry no-cache (the files change
// with the binary) and a Content-Security-Policy that allows scripts and
// styles from the node only and API calls to any origin (the page may read
// other members' Status). Safe for concurrent use.
func Handler() http.Handler {
	fsrv := http.StripPrefix(Path, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'self'; connect-src *; img-src 'self' data:; frame-ancestors 'none'")
		fsrv.ServeHTTP(w, r)
	})
}
