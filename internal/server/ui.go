package server

import (
	"embed"
	"net/http"

	"github.com/sluicehq/sluice/internal/config"
)

// The live page: static files embedded in the binary, served under /ui/
// with a Content-Security-Policy that allows only them (no inline script
// or style, no other origin). The page holds no data: its script asks GET
// /v1/top with the admin token the operator types in, every second.

//go:embed ui/index.html ui/app.js ui/app.css
var uiFiles embed.FS

// uiPolicy is the Content-Security-Policy of the page and its files.
const uiPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) uiRoutes(mux *http.ServeMux, role config.Role) {
	files := http.FileServerFS(uiFiles)
	mux.Handle("/ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	mux.Handle("/ui/", onlyMethods(func(w http.ResponseWriter, r *http.Request) {
		if !s.topAllows(w, r, role, false) {
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", uiPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		switch r.URL.Path {
		case "/ui/":
			http.ServeFileFS(w, r, uiFiles, "ui/index.html")
		case "/ui/app.js", "/ui/app.css":
			files.ServeHTTP(w, r)
		default:
			writeProblem(w, http.StatusNotFound, "Not found", "no file "+truncate(r.URL.Path, 128))
		}
	}, http.MethodGet, http.MethodHead))
}
