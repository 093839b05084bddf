package subset

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage/fsstore"
)

func TestSplitSizes(t *testing.T) {
	for _, tc := range []struct {
		n    int
		cfg  SplitConfig
		l, u int
	}{
		{10, SplitConfig{Labeled: 0.1, Unlabeled: 0.5}, 1, 5},
		{15, SplitConfig{Labeled: 0.1, Unlabeled: 0.5}, 2, 8}, // 1.5 and 7.5 round up
		{14041, SplitConfig{Labeled: 0.1, Unlabeled: 0.5}, 1404, 7021},
		{14041, SplitConfig{Labeled: 0.1, Rest: true, Unlabeled: 0.5}, 1404, 12637},
		{7, SplitConfig{Labeled: 1}, 7, 0},
		{0, SplitConfig{Labeled: 0.1, Unlabeled: 0.5}, 0, 0},
	} {
		l, u, err := tc.cfg.SplitSizes(tc.n)
		if err != nil || l != tc.l || u != tc.u {
			t.Errorf("%d sentences, %+v: %d + %d (%v), want %d + %d", tc.n, tc.cfg, l, u, err, tc.l, tc.u)
		}
	}
	if _, _, err := (SplitConfig{Labeled: 0.6, Unlabeled: 0.5}).SplitSizes(10); err == nil || !strings.Contains(err.Error(), "6 + 5 sentences") {
		t.Errorf("overlapping fractions: %v", err)
	}
}

func TestSplitSeededDisjoint(t *testing.T) {
	const n = 200
	cfg := SplitConfig{Labeled: 0.1, Unlabeled: 0.5, Seed: 7}
	l, u, err := Split(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 20 || len(u) != 100 {
		t.Fatalf("sizes %d, %d, want 20, 100", len(l), len(u))
	}
	if !slices.IsSorted(l) || !slices.IsSorted(u) {
		t.Errorf("parts not in corpus order: %v %v", l, u)
	}
	seen := map[int]bool{}
	for _, i := range append(slices.Clone(l), u...) {
		if i < 0 || i >= n || seen[i] {
			t.Fatalf("index %d out of range or in both parts", i)
		}
		seen[i] = true
	}
	// The same seed draws the same sample; another seed another one.
	l2, u2, _ := Split(n, cfg)
	if !reflect.DeepEqual(l, l2) || !reflect.DeepEqual(u, u2) {
		t.Error("same seed, different split")
	}
	cfg.Seed = 8
	if l3, _, _ := Split(n, cfg); reflect.DeepEqual(l, l3) {
		t.Error("seeds 7 and 8 drew the same labeled sentences")
	}
	// A larger labeled fraction with the same seed keeps the smaller one's
	// sentences: both are prefixes of one permutation.
	cfg.Seed = 7
	cfg.Labeled = 0.2
	big, _, _ := Split(n, cfg)
	for _, i := range l {
		if _, ok := slices.BinarySearch(big, i); !ok {
			t.Fatalf("sentence %d of the 10%% sample is not in the 20%% sample", i)
		}
	}
	// The rest: every sentence is in exactly one part.
	l, u, _ = Split(n, SplitConfig{Labeled: 0.1, Rest: true, Seed: 7})
	if len(l) != 20 || len(u) != n-20 {
		t.Errorf("rest: %d + %d sentences", len(l), len(u))
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The stage reads a text file with its labels file and writes the parts:
// sentences of the corpus, with tags or without, disjoint, and counted.
func TestSplitStage(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var text, labels strings.Builder
	for i := range 20 {
		fmt.Fprintf(&text, "w%d Paris .\n", i) // sentence i is told by its first token
		fmt.Fprintf(&labels, "O B-LOC O\n")
	}
	writeFile(t, dir, "text.txt", text.String())
	writeFile(t, dir, "labels.txt", labels.String())
	a, err := stages.Import(ctx, st, "datasets", dir, "corpus")
	if err != nil {
		t.Fatal(err)
	}
	s, ok := stages.Lookup(StageSplit)
	if !ok {
		t.Fatal("stage not registered")
	}
	exec := func(raw map[string]any) (map[string]stages.Artifact, error) {
		raw["corpus_file"], raw["corpus_labels"] = "text.txt", "labels.txt"
		params, err := s.ResolveParams(raw)
		if err != nil {
			t.Fatal(err)
		}
		return stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "runs/" + stages.NewAttemptID(),
			Inputs: map[string][]stages.Artifact{"corpus": {a}}})
	}
	outs, err := exec(map[string]any{"labeled": 0.1, "unlabeled": 0.5, "seed": 3})
	if err != nil {
		t.Fatal(err)
	}
	read := func(art stages.Artifact, name string, f corpus.Format) *corpus.Corpus {
		b, err := stages.NewInput(ctx, st, art).ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		c, err := corpus.Read(strings.NewReader(string(b)), name, f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	lab := read(outs["labeled"], "labeled.conll", corpus.FormatCoNLL)
	unl := read(outs["unlabeled"], UnlabeledFile, corpus.FormatText)
	if len(lab.Sentences) != 2 || len(unl.Sentences) != 10 {
		t.Fatalf("%d labeled and %d unlabeled sentences, want 2 and 10", len(lab.Sentences), len(unl.Sentences))
	}
	wantL, wantU, _ := Split(20, SplitConfig{Labeled: 0.1, Unlabeled: 0.5, Seed: 3})
	for k, i := range wantL {
		if s := lab.Sentences[k]; s.Tokens[0] != fmt.Sprintf("w%d", i) || strings.Join(s.Tags, " ") != "O B-LOC O" {
			t.Errorf("labeled sentence %d: %+v, want sentence %d with its tags", k, s, i)
		}
	}
	for k, i := range wantU {
		if s := unl.Sentences[k]; s.Tokens[0] != fmt.Sprintf("w%d", i) || s.Tags != nil {
			t.Errorf("unlabeled sentence %d: %+v, want sentence %d without tags", k, s, i)
		}
	}
	if m := outs["labeled"].Meta; m["format"] != "conll" || m["scheme"] != "bio" {
		t.Errorf("labeled meta %v", m)
	}
	b, err := stages.NewInput(ctx, st, outs["report"]).ReadFile(ReportFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep SplitReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	want := SplitReport{
		Config:    SplitConfig{Labeled: 0.1, Unlabeled: 0.5, Seed: 3},
		Corpus:    Part{Sentences: 20, Tokens: 60},
		Labeled:   Part{Sentences: 2, Tokens: 6, Entities: map[string]int{"LOC": 2}},
		Unlabeled: Part{Sentences: 10, Tokens: 30},
	}
	if !reflect.DeepEqual(rep, want) {
		t.Errorf("report %+v, want %+v", rep, want)
	}

	// The rest as text: 18 sentences.
	outs, err = exec(map[string]any{"labeled": 0.1, "unlabeled_rest": true, "seed": 3})
	if err != nil {
		t.Fatal(err)
	}
	if unl := read(outs["unlabeled"], UnlabeledFile, corpus.FormatText); len(unl.Sentences) != 18 {
		t.Errorf("rest: %d unlabeled sentences, want 18", len(unl.Sentences))
	}

	for _, tc := range []struct {
		raw  map[string]any
		want string
	}{
		{map[string]any{"labeled": 0.6, "unlabeled": 0.5}, "input corpus: labeled 0.6 and unlabeled 0.5 of 20 sentences are 12 + 10"},
		{map[string]any{"labeled": 0.01}, "keeps no sentence"},
	} {
		if _, err := exec(tc.raw); err == nil || !strings.Contains(err.Error(), tc.want) || !stages.IsPermanent(err) {
			t.Errorf("%v: error %v, want a permanent one with %q", tc.raw, err, tc.want)
		}
	}
}

// A corpus without tags cannot be split into a labeled part.
func TestSplitStageNeedsTags(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := stages.Import(ctx, st, "datasets", writeFile(t, t.TempDir(), "raw.txt", "a b\nc d\n"), "corpus")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := stages.Lookup(StageSplit)
	params, err := s.ResolveParams(map[string]any{"labeled": 0.5})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "runs/x", Inputs: map[string][]stages.Artifact{"corpus": {a}}})
	if err == nil || !strings.Contains(err.Error(), `sentence 1 ("a b") has no tags`) {
		t.Errorf("error %v", err)
	}
}
