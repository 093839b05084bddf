package predict

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/corpus/corpustest"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/train/tagger"
)

func TestTokenize(t *testing.T) {
	text := "Dr. O'Neil visited the U.S. in 2019-20, paid $3.5m to AT&T!\nNew line"
	var got []string
	for _, s := range Tokenize(text) {
		var words []string
		for _, tok := range s {
			if text[tok.Start:tok.End] != tok.Text {
				t.Fatalf("token %q has offsets [%d,%d) = %q", tok.Text, tok.Start, tok.End, text[tok.Start:tok.End])
			}
			words = append(words, tok.Text)
		}
		got = append(got, strings.Join(words, " "))
	}
	want := []string{
		"Dr .",
		"O'Neil visited the U.S. in 2019-20 , paid $ 3.5m to AT&T !",
		"New line",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("sentences\n got %q\nwant %q", got, want)
	}
	if s := Tokenize("  \n\t "); len(s) != 0 {
		t.Fatalf("blank text gave %v", s)
	}
	long := strings.Repeat("a ", MaxSentenceTokens+5)
	if s := Tokenize(long); len(s) != 2 || len(s[0]) != MaxSentenceTokens || len(s[1]) != 5 {
		t.Fatalf("a long sentence is cut at %d tokens: got %d sentences", MaxSentenceTokens, len(s))
	}
}

// TestEntitiesConfidence checks span decoding and the confidence (mean
// probability of the chosen tags) on hand-made probabilities.
func TestEntitiesConfidence(t *testing.T) {
	labels, err := tagger.NewLabels(corpus.BIO, []string{"PER", "LOC"})
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{tagger: &tagger.Tagger{Labels: labels}}
	row := func(tag string, p float32) []float32 {
		r := make([]float32, labels.NumTags())
		k, _ := labels.Index(tag)
		r[k] = p
		return r
	}
	text := "John Smith in Paris"
	toks := Tokenize(text)[0]
	pred := dataset.Prediction{
		Tags:  []string{"B-PER", "I-PER", "O", "B-LOC"},
		Probs: [][]float32{row("B-PER", 0.9), row("I-PER", 0.5), row("O", 0.99), row("B-LOC", 0.6)},
	}
	ents, err := m.entities([]string{"John", "Smith", "in", "Paris"}, pred, text, toks)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 {
		t.Fatalf("entities: %+v", ents)
	}
	per, loc := ents[0], ents[1]
	if per.Type != "PER" || per.Text != "John Smith" || per.Start != 0 || per.End != 10 || per.TokenStart != 0 || per.TokenEnd != 2 {
		t.Errorf("PER: %+v", per)
	}
	if d := per.Confidence - 0.7; d > 1e-6 || d < -1e-6 { // (0.9+0.5)/2
		t.Errorf("PER confidence %v, want 0.7", per.Confidence)
	}
	if loc.Type != "LOC" || loc.Text != "Paris" || loc.Start != 14 || loc.End != 19 {
		t.Errorf("LOC: %+v", loc)
	}
	if d := loc.Confidence - 0.6; d > 1e-6 || d < -1e-6 {
		t.Errorf("LOC confidence %v, want 0.6", loc.Confidence)
	}
	// Pre-tokenized input: no offsets, the tokens joined.
	ents, err = m.entities([]string{"John", "Smith", "in", "Paris"}, pred, "", nil)
	if err != nil || ents[0].Text != "John Smith" || ents[0].Start != -1 {
		t.Fatalf("pre-tokenized: %+v, %v", ents, err)
	}
}

// tinyModel trains a small tagger on testdata/tiny.txt.
func tinyModel(tb testing.TB, seed uint64) *tagger.Tagger {
	tb.Helper()
	b, err := os.ReadFile("testdata/tiny.txt")
	if err != nil {
		tb.Fatal(err)
	}
	c := corpustest.Inline(strings.Split(strings.TrimSpace(string(b)), "\n")...)
	run := tagger.DefaultTrainConfig()
	run.Epochs, run.BatchSize, run.LearningRate, run.Seed = 12, 4, 0.02, seed
	job := tagger.Job{
		Train: c, Device: gotch.CPU, Run: run, MinWordCount: 1,
		Model: tagger.Config{Scheme: "bio", Head: tagger.CRFHead, WordDim: 16, CharDim: 8, CharFilters: 12, CharKernel: 3,
			MaxWordLen: 16, CasingDim: 4, Hidden: 16, Layers: 1, Dropout: 0.1},
	}
	job.Run.Loss = tagger.LossCRF
	m, _, err := tagger.Fit(context.Background(), job)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// TestBatcherAnswersConcurrentRequestsLikeOneCall checks that batching
// changes nothing: concurrent requests get exactly what each would get
// from the model alone, texts and pre-tokenized sentences alike.
func TestBatcherAnswersConcurrentRequestsLikeOneCall(t *testing.T) {
	tagger := tinyModel(t, 1)
	m := NewModel(tagger, Info{Name: "tiny"})
	texts := []string{
		"John Smith lives in Paris.",
		"Anna met Peter in Berlin. It rained in London.",
		"Nothing here",
		"",
		"Carlos Ruiz flew to Madrid on Monday.",
	}
	want := make([]*Response, len(texts))
	for i, text := range texts {
		r, err := m.Annotate(Request{Texts: []string{text}}, 64)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = r
	}
	b := NewBatcher(m, Options{MaxBatch: 4})
	defer b.Close()
	var wg sync.WaitGroup
	got := make([]*Response, 40)
	errs := make([]error, 40)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = b.Predict(context.Background(), Request{Texts: []string{texts[i%len(texts)]}})
		}()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if g, w := entitiesString(got[i]), entitiesString(want[i%len(texts)]); g != w {
			t.Fatalf("request %d (%q): batched %s, alone %s", i, texts[i%len(texts)], g, w)
		}
	}
	if got[0].Model.Name != "tiny" || got[0].Model.Scheme != "bio" || len(got[0].Model.Types) != 2 {
		t.Errorf("model info %+v", got[0].Model)
	}
	if n := got[1].TokenCount; n != 11 {
		t.Errorf("token count %d, want 11", n)
	}
	// The tiny model learned the fixture: it finds its names.
	if s := entitiesString(want[0]); !strings.Contains(s, "PER:John Smith") || !strings.Contains(s, "LOC:Paris") {
		t.Logf("tiny model on %q: %s (accuracy is not asserted)", texts[0], s)
	}
	sent, err := b.Predict(context.Background(), Request{Sentences: [][]string{{"John", "Smith", "lives", "in", "Paris", "."}}})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := spansString(sent), spansString(want[0]); g != w {
		t.Errorf("pre-tokenized %s, raw %s", g, w)
	}
	if _, err := b.Predict(context.Background(), Request{Sentences: [][]string{{}}}); err == nil {
		t.Error("an empty sentence is accepted")
	}
}

func TestBatcherWithoutModelAndSwap(t *testing.T) {
	b := NewBatcher(nil, Options{})
	defer b.Close()
	if _, err := b.Predict(context.Background(), Request{Texts: []string{"Paris"}}); err != ErrNoModel {
		t.Fatalf("no model: %v", err)
	}
	b.Swap(NewModel(tinyModel(t, 2), Info{Version: "2"}))
	r, err := b.Predict(context.Background(), Request{Texts: []string{"Paris"}})
	if err != nil || r.Model.Version != "2" {
		t.Fatalf("after swap: %+v %v", r, err)
	}
}

func entitiesString(r *Response) string {
	var parts []string
	for _, res := range r.Results {
		for _, e := range res.Entities {
			parts = append(parts, e.Type+":"+e.Text+"@"+strconv.Itoa(e.Start))
		}
		parts = append(parts, "|")
	}
	return strings.Join(parts, " ")
}

// spansString lists the entities by token positions only.
func spansString(r *Response) string {
	var parts []string
	for _, res := range r.Results {
		for _, e := range res.Entities {
			parts = append(parts, fmt.Sprintf("%s[%d,%d)", e.Type, e.TokenStart, e.TokenEnd))
		}
	}
	return strings.Join(parts, " ")
}

func TestReadRequests(t *testing.T) {
	raw, err := readRequests(strings.NewReader("John lives in Paris.\n\n  \nAnna met Carlos.\n"), "raw.txt", false, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(raw.texts) != 2 || raw.texts[1] != "Anna met Carlos." || raw.lines[0] != 1 || raw.lines[1] != 4 {
		t.Fatalf("raw: %+v", raw)
	}
	tok, err := readRequests(strings.NewReader("John B-PER\nlives O\n\nAnna B-PER\n"), "x.conll", true, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(tok.sentences) != 2 || strings.Join(tok.sentences[0], " ") != "John lives" || tok.lines[1] != 2 {
		t.Fatalf("tokenized: %+v", tok)
	}
	if r := tok.slice(1, 2); len(r.Sentences) != 1 || r.Texts != nil {
		t.Fatalf("slice: %+v", r)
	}
	if _, err := readRequests(strings.NewReader("a\n"), "x.unknown", true, ""); err == nil || !strings.Contains(err.Error(), "x.unknown") {
		t.Fatalf("unknown format: %v", err)
	}
}
