package subset

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage/fsstore"
)

func sentence(tokens, tags string) corpus.Sentence {
	return corpus.Sentence{Tokens: strings.Fields(tokens), Tags: strings.Fields(tags)}
}

// fixture has 7 entities: PER, LOC, PER in the first sentence, none in the
// second, ORG, LOC, PER, MISC in the third.
func fixture() *corpus.Corpus {
	return &corpus.Corpus{Sentences: []corpus.Sentence{
		sentence("John Smith met Mary in New York", "B-PER I-PER O B-PER O B-LOC I-LOC"),
		sentence("nothing here", "O O"),
		sentence("IBM opened Paris office with Ann , a German", "B-ORG O B-LOC O O B-PER O O B-MISC"),
	}}
}

func TestMaskExtremes(t *testing.T) {
	gold := fixture()
	all, rep, err := Mask(gold, 0, 7, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range all.Sentences {
		if !slices.Equal(s.Tags, gold.Sentences[i].Tags) || !slices.Equal(s.Tokens, gold.Sentences[i].Tokens) {
			t.Errorf("p=0, sentence %d: %v, want the gold %v", i+1, s.Tags, gold.Sentences[i].Tags)
		}
	}
	if rep.Kept != 7 || rep.Dropped != 0 || rep.Types["PER"].Kept != 3 || rep.Types["LOC"].Kept != 2 {
		t.Errorf("p=0 report %+v, want 7 kept (3 PER, 2 LOC)", rep)
	}
	none, rep, err := Mask(gold, 1, 7, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range none.Sentences {
		if strings.Trim(strings.Join(s.Tags, ""), "O") != "" || len(s.Tags) != len(gold.Sentences[i].Tags) {
			t.Errorf("p=1, sentence %d: %v, want all O", i+1, s.Tags)
		}
	}
	if rep.Kept != 0 || rep.Dropped != 7 || rep.Types["PER"].Dropped != 3 || rep.Types["MISC"].Dropped != 1 {
		t.Errorf("p=1 report %+v, want 7 dropped (3 PER, 1 MISC)", rep)
	}
}

// TestMaskDraws checks Mask against its contract, one draw of the seeded
// PCG generator per entity in corpus order, on a corpus large enough that
// a wrong order or an extra draw would show.
func TestMaskDraws(t *testing.T) {
	var gold corpus.Corpus
	for range 50 {
		gold.Sentences = append(gold.Sentences, fixture().Sentences...)
	}
	const p, seed = 0.6, 42
	masked, rep, err := Mask(&gold, p, seed, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, maskStream))
	dropped := 0
	for i, s := range gold.Sentences {
		spans, _ := corpus.BIO.Spans(s.Tags)
		var want []corpus.Span
		for _, sp := range spans {
			if rng.Float64() < p {
				dropped++
			} else {
				want = append(want, sp)
			}
		}
		got, err := corpus.BIO.Spans(masked.Sentences[i].Tags)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("sentence %d: kept %v, want %v", i+1, got, want)
		}
	}
	if rep.Dropped != dropped || rep.Kept+rep.Dropped != 350 {
		t.Errorf("report: %d kept, %d dropped, want %d dropped of 350", rep.Kept, rep.Dropped, dropped)
	}
	// The same seed drops the same entities; another seed other ones.
	again, _, _ := Mask(&gold, p, seed, corpus.BIO)
	other, _, _ := Mask(&gold, p, seed+1, corpus.BIO)
	same, differ := true, false
	for i := range masked.Sentences {
		same = same && slices.Equal(again.Sentences[i].Tags, masked.Sentences[i].Tags)
		differ = differ || !slices.Equal(other.Sentences[i].Tags, masked.Sentences[i].Tags)
	}
	if !same || !differ {
		t.Errorf("same seed gives the same corpus: %v; another seed another: %v", same, differ)
	}
}

// TestMaskIOB1 drops the first of two touching PER entities written in
// IOB1: the second, whose B- only marked the boundary, becomes I-PER.
func TestMaskIOB1(t *testing.T) {
	gold := &corpus.Corpus{Sentences: []corpus.Sentence{sentence("Ann Bob", "I-PER B-PER")}}
	for seed := uint64(0); seed < 100; seed++ {
		masked, rep, err := Mask(gold, 0.5, seed, corpus.IOB1)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Types["PER"].Dropped == 1 && masked.Sentences[0].Tags[0] == "O" {
			if got := masked.Sentences[0].Tags[1]; got != "I-PER" {
				t.Fatalf("seed %d: second entity tagged %s, want I-PER", seed, got)
			}
			return
		}
	}
	t.Fatal("no seed in 0..99 dropped only the first entity")
}

func TestMaskErrors(t *testing.T) {
	unlabeled := &corpus.Corpus{Sentences: []corpus.Sentence{sentence("a b", "O O"), {Tokens: []string{"c"}}}}
	if _, _, err := Mask(unlabeled, 0.5, 1, corpus.BIO); err == nil || !strings.Contains(err.Error(), "sentence 2 has no tags") {
		t.Errorf("unlabeled sentence: %v, want an error naming sentence 2", err)
	}
	if _, _, err := Mask(fixture(), 1.5, 1, corpus.BIO); err == nil {
		t.Error("p = 1.5: no error")
	}
}

// TestMaskStage runs the stage on a file store, from a text file and its
// labels file to a CoNLL corpus that consumers read by its recorded format.
func TestMaskStage(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var text, labels strings.Builder
	for _, s := range fixture().Sentences {
		text.WriteString(strings.Join(s.Tokens, " ") + "\n")
		labels.WriteString(strings.Join(s.Tags, " ") + "\n")
	}
	data := stagestest.ImportFiles(t, st, map[string][]byte{"train_text.txt": []byte(text.String()), "train_labels.txt": []byte(labels.String()), "text_only.txt": []byte(text.String())})
	s, _ := stages.Lookup(StageMask)
	exec := func(params map[string]any) (map[string]stages.Artifact, error) {
		p, err := s.ResolveParams(params)
		if err != nil {
			t.Fatal(err)
		}
		return stages.Exec(ctx, s, stages.Env{Store: st, Params: p, Inputs: map[string][]stages.Artifact{"corpus": {data}}, OutputPrefix: "runs/mask/" + stages.NewAttemptID()})
	}
	outs, err := exec(map[string]any{"p": 1, "corpus_file": "train_text.txt", "corpus_labels": "train_labels.txt"})
	if err != nil {
		t.Fatal(err)
	}
	masked := stages.NewInput(ctx, st, outs["masked"])
	got, err := dataset.Source{}.ReadFrom(masked, "masked")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Sentences) != 3 || got.Sentences[2].Tokens[0] != "IBM" || got.Sentences[2].Tags[0] != "O" || masked.Meta[dataset.MetaScheme] != "bio" {
		t.Errorf("masked corpus %+v (meta %v), want the 3 sentences all O, scheme bio", got.Sentences, masked.Meta)
	}
	var rep MaskReport
	if err := stages.NewInput(ctx, st, outs["report"]).ReadJSON("report.json", &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Dropped != 7 || rep.Types["ORG"].Dropped != 1 {
		t.Errorf("report %+v, want 7 dropped, 1 ORG", rep)
	}
	txt, err := stages.NewInput(ctx, st, outs["report"]).ReadFile("report.txt")
	if err != nil || !bytes.Contains(txt, []byte("total")) {
		t.Errorf("report.txt %q, %v", txt, err)
	}

	_, err = exec(map[string]any{"corpus_file": "text_only.txt"})
	if err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), "sentence 1 has no tags") {
		t.Errorf("unlabeled input: %v, want a permanent error naming sentence 1", err)
	}
}
