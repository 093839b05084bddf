package nodelog

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func TestNodeLinesAreKeptCappedAndRedacted(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	h := NewHandler(slog.NewTextHandler(io.Discard, nil), rdb, "ns", MaxLines(3))
	log := slog.New(h)
	node := log.With("run", "r1", "node", "train[seed=1]", "stage", "train.tagger")
	for i := 1; i <= 5; i++ {
		node.Info("epoch done", "epoch", i, "tokens_per_sec", 1000.5, "api_token", "s3cr3t")
	}
	node.Debug("below the level")
	log.Info("not a node's", "run", "r1")
	log.Warn("attempt failed", "run", "r1", "node", "eval", "err", io.ErrUnexpectedEOF)
	h.Close()

	lines, err := NewReader(rdb, "ns").NodeLogs(context.Background(), "r1", "train[seed=1]", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines kept, want the last 3", len(lines))
	}
	var first map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	if first["msg"] != "epoch done" || first["epoch"] != 3.0 || first["tokens_per_sec"] != 1000.5 || first["api_token"] != "xxxxx" ||
		first["stage"] != "train.tagger" || first["level"] != "INFO" || first["run"] != nil {
		t.Errorf("line: %s", lines[0])
	}
	other, _ := NewReader(rdb, "ns").NodeLogs(context.Background(), "r1", "eval", 10)
	if len(other) != 1 || !json.Valid(other[0]) {
		t.Fatalf("eval lines: %s", other)
	}
	var m map[string]any
	_ = json.Unmarshal(other[0], &m)
	if m["err"] != "unexpected EOF" || m["level"] != "WARN" {
		t.Errorf("eval line: %s", other[0])
	}
	if ttl := mr.TTL(Key("ns", "r1", "eval")); ttl != DefaultTTL {
		t.Errorf("ttl %v", ttl)
	}
	if h.Dropped() != 0 {
		t.Errorf("%d lines dropped", h.Dropped())
	}
}
