package server

import (
	"embed"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
)

// web holds the dashboard: plain HTML, CSS and JavaScript with no build
// step and nothing fetched from elsewhere, so the binary serves it offline.
//
//go:embed web
var web embed.FS

var loginTemplate = template.Must(template.ParseFS(web, "web/login.html"))

// securityHeaders keep the dashboard's pages to this origin's own assets.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

func (s *Server) dashboardRoutes() {
	assets, _ := fs.Sub(web, "web")
	page := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, err := fs.ReadFile(assets, name)
			if err != nil {
				http.NotFound(w, r)
				return
			}
			securityHeaders(w)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write(b)
		}
	}
	s.mux.Handle("GET /{$}", s.auth(page("index.html"), true))
	s.mux.Handle("GET /assets/{file}", s.auth(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		b, err := fs.ReadFile(assets, name)
		if err != nil || name == "login.html" || name == "index.html" {
			http.NotFound(w, r)
			return
		}
		securityHeaders(w)
		w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(name)))
		_, _ = w.Write(b)
	}, true))
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if s.authorized(r) {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.loginForm(w, http.StatusOK, "")
}

func (s *Server) loginForm(w http.ResponseWriter, status int, problem string) {
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = loginTemplate.Execute(w, map[string]string{"Problem": problem})
}
