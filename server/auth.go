package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// sessionCookie holds the dashboard's session: an HMAC of the token, so
// that the browser never stores the token itself, and a new token ends
// every session.
const sessionCookie = "nerflow_session"

func sessionValue(token string) string {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("nerflow dashboard session v1"))
	return hex.EncodeToString(mac.Sum(nil))
}

// equal compares secrets in constant time (hashing first hides lengths).
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// authorized accepts "Authorization: Bearer TOKEN" or the session cookie.
func (s *Server) authorized(r *http.Request) bool {
	ok, _ := s.credentials(r)
	return ok
}

// credentials is authorized; presented says whether the request carried a
// token or a session at all (a wrong one counts against the client's
// address; none does not).
func (s *Server) credentials(r *http.Request) (ok, presented bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		return ok && strings.EqualFold(scheme, "Bearer") && equal(strings.TrimSpace(tok), s.token), true
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		return equal(c.Value, s.session), true
	}
	return false, false
}

// wrongToken counts a wrong token against client and logs it.
func (s *Server) wrongToken(client string, r *http.Request) {
	s.authLimit.failed(client)
	s.log.Warn("wrong token", "client", client, "method", r.Method, "path", r.URL.Path)
}

// auth wraps h: unauthorized API calls get a 401, unauthorized pages a
// redirect to the login page. A client address that presented too many
// wrong tokens gets 429 for a while, whatever it presents then: answering
// a right token would tell a guesser when it guessed right.
func (s *Server) auth(h http.HandlerFunc, page bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client := clientOf(r)
		if wait := s.authLimit.blocked(client); wait > 0 {
			tooManyFailures(w, wait)
			return
		}
		ok, presented := s.credentials(r)
		if ok {
			h(w, r)
			return
		}
		if presented {
			s.wrongToken(client, r)
		}
		if page {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="nerflow"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong bearer token (Authorization: Bearer TOKEN, the serve.token of the server's configuration)")
	})
}

// login checks the token posted by the login form and sets the session
// cookie. SameSite=Strict keeps other sites from riding the session
// (the API's state-changing calls are POSTs).
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	client := clientOf(r)
	if wait := s.authLimit.blocked(client); wait > 0 {
		tooManyFailures(w, wait)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil || !equal(r.PostFormValue("token"), s.token) {
		s.wrongToken(client, r)
		s.loginForm(w, http.StatusUnauthorized, "Wrong token.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.session, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, _ *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, map[string]string{"status": "logged out"})
}
