// Package nodelog keeps the last log lines of each pipeline node in Redis,
// for the API and dashboard: a slog.Handler passes every record on to the
// process's handler and also appends the records that carry a run and a
// node (the engine tags a stage's logger with both) to a capped list per
// node, which expires with the run.
package nodelog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of a Handler.
const (
	DefaultMaxLines = 500
	DefaultTTL      = 7 * 24 * time.Hour
)

// Key is the Redis list holding node's lines in run (the run id in braces,
// a hash tag, as the engine's own keys).
func Key(ns, run, node string) string { return ns + ":nodelog:{" + run + "}:" + node }

// Handler tees node records to Redis. Writes happen on a background
// goroutine so that logging never waits for Redis; when Redis falls behind
// by more than a buffer, lines are dropped and counted.
type Handler struct {
	next  slog.Handler
	attrs []slog.Attr // from WithAttrs, flattened (groups are not teed)
	run   string
	node  string
	sink  *sink
}

type sink struct {
	rdb      redis.UniversalClient
	ns       string
	maxLines int64
	ttl      time.Duration
	level    slog.Level
	lines    chan entry
	dropped  atomic.Int64
	done     chan struct{}
	once     sync.Once
}

type entry struct {
	key  string
	line []byte
}

// Option configures a Handler.
type Option func(*sink)

// MaxLines caps each node's list.
func MaxLines(n int) Option { return func(s *sink) { s.maxLines = int64(n) } }

// TTL sets how long a node's lines outlive their last write.
func TTL(d time.Duration) Option { return func(s *sink) { s.ttl = d } }

// Level is the least level kept (default Info).
func Level(l slog.Level) Option { return func(s *sink) { s.level = l } }

// NewHandler returns a handler that passes records to next and keeps node
// records in rdb under namespace ns. Close it to flush.
func NewHandler(next slog.Handler, rdb redis.UniversalClient, ns string, opts ...Option) *Handler {
	s := &sink{rdb: rdb, ns: ns, maxLines: DefaultMaxLines, ttl: DefaultTTL, level: slog.LevelInfo,
		lines: make(chan entry, 1024), done: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	go s.loop()
	return &Handler{next: next, sink: s}
}

// Close writes the lines still buffered and stops the writer.
func (h *Handler) Close() {
	h.sink.once.Do(func() {
		close(h.sink.lines)
		<-h.sink.done
	})
}

// Dropped counts lines lost because Redis was too slow or failing.
func (h *Handler) Dropped() int64 { return h.sink.dropped.Load() }

// Enabled reports whether next or the node log wants the level.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l) || l >= h.sink.level
}

// Handle passes r on and tees it when it belongs to a node.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if h.next.Enabled(ctx, r.Level) {
		err = h.next.Handle(ctx, r)
	}
	if r.Level < h.sink.level {
		return err
	}
	run, node := h.run, h.node
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "run":
			run = a.Value.String()
		case "node":
			node = a.Value.String()
		}
		return true
	})
	if run == "" || node == "" {
		return err
	}
	h.sink.add(Key(h.sink.ns, run, node), h.encode(r))
	return err
}

// WithAttrs remembers run and node attributes.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	c.attrs = append(append([]slog.Attr{}, h.attrs...), as...)
	for _, a := range as {
		switch a.Key {
		case "run":
			c.run = a.Value.String()
		case "node":
			c.node = a.Value.String()
		}
	}
	return &c
}

// WithGroup applies to next only: node lines stay flat.
func (h *Handler) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	return &c
}

// secretName matches attribute names whose values must not leave the
// process in a node's log: "token", "api_token", "secret_key", "password",
// ... (not "tokens_per_sec").
var secretName = regexp.MustCompile(`(?i)(^|[_.-])(token|secret|secret_key|access_key|password|passwd|credentials?|authorization|api_key)$`)

func secretKey(k string) bool { return secretName.MatchString(k) }

// encode writes a record as one JSON object: time, level, msg, then the
// attributes other than run and node (known from the key).
func (h *Handler) encode(r slog.Record) []byte {
	m := map[string]any{"time": r.Time.UTC().Format(time.RFC3339Nano), "level": r.Level.String(), "msg": r.Message}
	put := func(a slog.Attr) {
		if a.Key == "run" || a.Key == "node" || a.Key == "" {
			return
		}
		if secretKey(a.Key) {
			m[a.Key] = "xxxxx"
			return
		}
		v := a.Value.Resolve()
		switch v.Kind() {
		case slog.KindString:
			m[a.Key] = v.String()
		case slog.KindInt64, slog.KindUint64, slog.KindFloat64, slog.KindBool:
			m[a.Key] = v.Any()
		default:
			if e, ok := v.Any().(error); ok {
				m[a.Key] = e.Error()
			} else {
				m[a.Key] = fmt.Sprint(v.Any())
			}
		}
	}
	for _, a := range h.attrs {
		put(a)
	}
	r.Attrs(func(a slog.Attr) bool { put(a); return true })
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(m)
	return bytes.TrimRight(buf.Bytes(), "\n")
}

func (s *sink) add(key string, line []byte) {
	defer func() {
		if recover() != nil { // closed: the process is shutting down
			s.dropped.Add(1)
		}
	}()
	select {
	case s.lines <- entry{key, line}:
	default:
		s.dropped.Add(1)
	}
}

// loop writes buffered lines, a pipeline per burst.
func (s *sink) loop() {
	defer close(s.done)
	for e := range s.lines {
		batch := []entry{e}
	more:
		for len(batch) < 256 {
			select {
			case e, ok := <-s.lines:
				if !ok {
					break more
				}
				batch = append(batch, e)
			default:
				break more
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, e := range batch {
				p.RPush(ctx, e.key, e.line)
			}
			for _, e := range batch {
				p.LTrim(ctx, e.key, -s.maxLines, -1)
				p.Expire(ctx, e.key, s.ttl)
			}
			return nil
		})
		cancel()
		if err != nil {
			s.dropped.Add(int64(len(batch)))
		}
	}
}

// Reader reads node logs.
type Reader struct {
	rdb redis.UniversalClient
	ns  string
}

// NewReader reads the logs kept under namespace ns.
func NewReader(rdb redis.UniversalClient, ns string) *Reader { return &Reader{rdb: rdb, ns: ns} }

// NodeLogs returns the last limit lines of node in run, oldest first.
func (r *Reader) NodeLogs(ctx context.Context, run, node string, limit int) ([]json.RawMessage, error) {
	vals, err := r.rdb.LRange(ctx, Key(r.ns, run, node), int64(-limit), -1).Result()
	if err != nil {
		return nil, fmt.Errorf("reading logs of %s/%s: %w", run, node, err)
	}
	out := make([]json.RawMessage, 0, len(vals))
	for _, v := range vals {
		out = append(out, json.RawMessage(v))
	}
	return out, nil
}
