package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// rateLimitedLogger lets through one record per kind of message per period
// and counts the others, so that a server away for minutes costs a few log
// lines rather than one per poll. A message's kind is its text up to the
// first digit or colon, which is where asynq and go-redis put the varying
// part (addresses, ids, the wrapped error).
type rateLimitedLogger struct {
	l      *slog.Logger
	period time.Duration

	mu   sync.Mutex
	seen map[string]*seenMsg
}

type seenMsg struct {
	last       time.Time
	suppressed int
}

func newRateLimitedLogger(l *slog.Logger, period time.Duration) *rateLimitedLogger {
	return &rateLimitedLogger{l: l, period: period, seen: map[string]*seenMsg{}}
}

func messageKind(msg string) string {
	if i := strings.IndexAny(msg, ":0123456789"); i > 0 {
		return msg[:i]
	}
	return msg
}

func (r *rateLimitedLogger) log(level slog.Level, msg string, args ...any) {
	if !r.l.Enabled(context.Background(), level) {
		return
	}
	kind := fmt.Sprint(level) + messageKind(msg)
	now := time.Now()
	r.mu.Lock()
	s := r.seen[kind]
	if s == nil {
		s = &seenMsg{}
		r.seen[kind] = s
	}
	if !s.last.IsZero() && now.Sub(s.last) < r.period {
		s.suppressed++
		r.mu.Unlock()
		return
	}
	suppressed := s.suppressed
	s.last, s.suppressed = now, 0
	r.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "similar_suppressed", suppressed)
	}
	r.l.Log(context.Background(), level, msg, args...)
}

func (r *rateLimitedLogger) Warn(msg string, args ...any)  { r.log(slog.LevelWarn, msg, args...) }
func (r *rateLimitedLogger) Error(msg string, args ...any) { r.log(slog.LevelError, msg, args...) }

// asynqLogger adapts slog to asynq's logger interface, rate-limited: while
// Redis is away asynq logs a failure per poll and per heartbeat.
type asynqLogger struct{ r *rateLimitedLogger }

func newAsynqLogger(l *slog.Logger, period time.Duration) asynqLogger {
	return asynqLogger{newRateLimitedLogger(l, period)}
}

func (a asynqLogger) Debug(args ...any) { a.r.l.Debug(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.r.l.Info(fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.r.Warn(fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.r.Error(fmt.Sprint(args...)) }
func (a asynqLogger) Fatal(args ...any) { a.r.l.Error(fmt.Sprint(args...)); os.Exit(1) }

// RouteRedisLogs sends the go-redis client's own messages (a failed dial
// per pooled connection while the server is away, printed to stderr by
// default) to l as warnings, at most one of a kind per period. go-redis has
// one logger per process, so the commands call this once at start.
func RouteRedisLogs(l *slog.Logger, period time.Duration) {
	redis.SetLogger(redisLogger{newRateLimitedLogger(l.With("component", "go-redis"), period)})
}

type redisLogger struct{ r *rateLimitedLogger }

func (g redisLogger) Printf(_ context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	g.r.Warn(msg)
}
