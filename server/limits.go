package server

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Limits on what a client may send. Every request is held to them before
// any handler runs; handlers that read a body hold it to smaller limits
// of their own.
const (
	// DefaultMaxBody bounds a request's body: the largest an endpoint takes
	// (a spec submitted, a batch of texts to tag).
	DefaultMaxBody = 1 << 20
	// MaxHeaderBytes bounds a request's header lines and URL together.
	MaxHeaderBytes = 64 << 10
	// DefaultAuthFailures wrong tokens per DefaultAuthWindow from one
	// client address are answered; the next get 429 until the oldest
	// leaves the window.
	DefaultAuthFailures = 5
	DefaultAuthWindow   = time.Minute
	// maxTrackedClients bounds the limiter's memory: addresses beyond it
	// are not tracked (and not limited) until older ones expire.
	maxTrackedClients = 100_000
)

// WithMaxBody sets the bound on request bodies (DefaultMaxBody).
func WithMaxBody(n int64) Option { return func(s *Server) { s.maxBody = n } }

// WithAuthLimit allows failures wrong tokens per window from one client
// address (DefaultAuthFailures per DefaultAuthWindow).
func WithAuthLimit(failures int, window time.Duration) Option {
	return func(s *Server) { s.authLimit = newAuthLimiter(failures, window) }
}

// HTTPServer returns an http.Server for s with the limits that belong to
// the connection: header size and the time to send the headers. It has no
// write timeout: downloads of large artifacts stream for as long as they
// need.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s, MaxHeaderBytes: MaxHeaderBytes, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
}

// limit refuses a request over the bounds on headers and bodies, and
// bounds the body that handlers read. It reports whether to go on.
func (s *Server) limit(w http.ResponseWriter, r *http.Request) bool {
	// net/http enforces MaxHeaderBytes for servers made by HTTPServer;
	// this holds for any other server that mounts the handler.
	size := len(r.RequestURI)
	for k, vs := range r.Header {
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	if size > MaxHeaderBytes {
		writeError(w, http.StatusRequestHeaderFieldsTooLarge, "request headers over %d bytes", MaxHeaderBytes)
		return false
	}
	if r.ContentLength > s.maxBody {
		// Refused before a byte of it is read; the connection is closed
		// rather than drained.
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestEntityTooLarge, "request body over %d bytes", s.maxBody)
		return false
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
	}
	return true
}

// authLimiter counts the wrong tokens each client address presented in
// the last window.
type authLimiter struct {
	max    int
	window time.Duration
	now    func() time.Time

	mu    sync.Mutex
	fails map[string][]time.Time // oldest first, at most max
}

func newAuthLimiter(max int, window time.Duration) *authLimiter {
	return &authLimiter{max: max, window: window, now: time.Now, fails: map[string][]time.Time{}}
}

// clientOf is the address a request is counted under: the peer's IP (a
// header such as X-Forwarded-For is the client's to write), an IPv6 peer
// by its /64, the block one host usually holds.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// blocked reports how long client must wait before it may present a token
// again (0: it may now).
func (l *authLimiter) blocked(client string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	fails := l.recent(client)
	if len(fails) < l.max {
		return 0
	}
	return fails[0].Add(l.window).Sub(l.now())
}

// failed records a wrong token from client.
func (l *authLimiter) failed(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fails := l.recent(client)
	if fails == nil && len(l.fails) >= maxTrackedClients {
		l.sweep()
		if len(l.fails) >= maxTrackedClients {
			return
		}
	}
	fails = append(fails, l.now())
	if len(fails) > l.max {
		fails = fails[len(fails)-l.max:]
	}
	l.fails[client] = fails
}

// recent returns client's failures within the window, dropping older ones.
func (l *authLimiter) recent(client string) []time.Time {
	fails := l.fails[client]
	cut := l.now().Add(-l.window)
	i := 0
	for i < len(fails) && !fails[i].After(cut) {
		i++
	}
	if i == len(fails) {
		delete(l.fails, client)
		return nil
	}
	fails = fails[i:]
	l.fails[client] = fails
	return fails
}

func (l *authLimiter) sweep() {
	for client := range l.fails {
		l.recent(client)
	}
}

// tooManyFailures answers a client that presented too many wrong tokens.
func tooManyFailures(w http.ResponseWriter, wait time.Duration) {
	secs := int(wait/time.Second) + 1
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, http.StatusTooManyRequests, "too many wrong tokens from this address; try again in %d s", secs)
}
