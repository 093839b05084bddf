package subset

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage/fsstore"
)

// noiseFixture is distant tags and their gold: the labels miss Mary (PER)
// and Reuters (ORG); "U.S." and "Mary" are capitalized but not the words a
// false match may take (punctuation; a gold entity once gold is given).
func noiseFixture() (tagged, gold *corpus.Corpus) {
	tagged = &corpus.Corpus{Sentences: []corpus.Sentence{
		sentence("John met Mary in Paris", "B-PER O O O B-LOC"),
		sentence("Paris said Reuters", "B-LOC O O"),
		sentence("New York and Paris , U.S.", "B-LOC I-LOC O B-LOC O O"),
	}}
	gold = &corpus.Corpus{Sentences: []corpus.Sentence{
		sentence("John met Mary in Paris", "B-PER O B-PER O B-LOC"),
		sentence("Paris said Reuters", "B-LOC O B-ORG"),
		sentence("New York and Paris , U.S.", "B-LOC I-LOC O B-LOC O B-LOC"),
	}}
	return tagged, gold
}

func tagsOf(c *corpus.Corpus) []string {
	var out []string
	for _, s := range c.Sentences {
		out = append(out, strings.Join(s.Tags, " "))
	}
	return out
}

func TestNoiseNone(t *testing.T) {
	tagged, gold := noiseFixture()
	got, rep, err := Noise(tagged, gold, NoiseRates{}, 3, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tagsOf(got), tagsOf(tagged)) {
		t.Errorf("no noise: %q, want the input's tags", tagsOf(got))
	}
	if rep.Types["LOC"].Entities != 4 || rep.Types["PER"].Entities != 1 {
		t.Errorf("report %+v, want 4 LOC and 1 PER entities", rep.Types)
	}
	// 5 labeled, all right, of 8 gold entities.
	if b := rep.Before.Micro; b.Precision != 1 || math.Abs(b.Recall-5.0/8) > 1e-12 || rep.After.Micro != b {
		t.Errorf("scores before %+v after %+v, want P 1, R 5/8 both", b, rep.After.Micro)
	}
}

// Every entity dropped, every eligible word a false match: only the
// capitalized words of letters outside the gold entities are tagged.
func TestNoiseDropAndFalseMatch(t *testing.T) {
	tagged, gold := noiseFixture()
	rates := NoiseRates{Drop: 1, FalseMatch: 1}
	got, rep, err := Noise(tagged, gold, rates, 1, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	// No word outside a gold entity is a capitalized word of letters.
	for i, s := range got.Sentences {
		if strings.Trim(strings.Join(s.Tags, ""), "O") != "" {
			t.Errorf("with gold, sentence %d: %v, want all O", i+1, s.Tags)
		}
	}
	if rep.Types["LOC"].Dropped != 4 || rep.After.Micro.Recall != 0 {
		t.Errorf("report %+v / %+v, want 4 LOC dropped and recall 0", rep.Types["LOC"], rep.After.Micro)
	}
	// Without gold, Mary and Reuters (unlabeled) become false matches,
	// each of one of the corpus's types (LOC, PER); the words already
	// labeled are dropped first, then open to false matches too.
	got, rep, err = Noise(tagged, nil, rates, 1, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"x O x O x", "x O x", "x x O x O O"} {
		for k, w := range strings.Fields(want) {
			tag := got.Sentences[i].Tags[k]
			if (w == "x") != strings.HasPrefix(tag, "B-") {
				t.Errorf("without gold, sentence %d token %d: %s, want a one-word entity only at the capitalized words", i+1, k+1, tag)
			}
		}
	}
	if rep.Before != nil {
		t.Errorf("without gold the report scores %+v", rep.Before)
	}
	var matches int
	for _, n := range rep.Types {
		matches += n.FalseMatches
	}
	if matches != 8 {
		t.Errorf("%d false matches, want 8", matches)
	}
}

// A decision belongs to a string: "Paris" takes one type everywhere, and
// a shrunk "New York" keeps York.
func TestNoisePerString(t *testing.T) {
	tagged, _ := noiseFixture()
	for seed := range uint64(20) {
		got, _, err := Noise(tagged, nil, NoiseRates{Retype: 0.5, Shrink: 1}, seed, corpus.BIO)
		if err != nil {
			t.Fatal(err)
		}
		paris := []string{got.Sentences[0].Tags[4], got.Sentences[1].Tags[0], got.Sentences[2].Tags[3]}
		if paris[0] != paris[1] || paris[1] != paris[2] || !slices.Contains([]string{"B-LOC", "B-PER"}, paris[0]) {
			t.Errorf("seed %d: Paris tagged %v, want one tag of the corpus's types", seed, paris)
		}
		if york := got.Sentences[2].Tags[:2]; york[0] != "O" || !strings.HasPrefix(york[1], "B-") {
			t.Errorf("seed %d: New York tagged %v, want York alone", seed, york)
		}
	}
	// Another seed, other decisions: over 20 seeds Paris is retyped at
	// least once and kept at least once (each 0.5^20 to fail).
	types := map[string]bool{}
	for seed := range uint64(20) {
		got, _, _ := Noise(tagged, nil, NoiseRates{Retype: 0.5}, seed, corpus.BIO)
		types[got.Sentences[1].Tags[0]] = true
	}
	if len(types) != 2 {
		t.Errorf("Paris over 20 seeds: %v, want both LOC and PER", types)
	}
}

func TestNoiseErrors(t *testing.T) {
	tagged, gold := noiseFixture()
	gold.Sentences[1] = sentence("Paris said", "B-LOC O")
	if _, _, err := Noise(tagged, gold, NoiseRates{}, 1, corpus.BIO); err == nil || !strings.Contains(err.Error(), "sentence 2: 3 tokens but 2 gold tags") {
		t.Errorf("mismatched gold: %v, want an error naming sentence 2", err)
	}
	if _, _, err := Noise(tagged, &corpus.Corpus{}, NoiseRates{}, 1, corpus.BIO); err == nil || !strings.Contains(err.Error(), "3 sentences but 0 gold") {
		t.Errorf("short gold: %v", err)
	}
	tagged.Sentences[2].Tags = nil
	if _, _, err := Noise(tagged, nil, NoiseRates{}, 1, corpus.BIO); err == nil || !strings.Contains(err.Error(), "sentence 3 has no tags") {
		t.Errorf("untagged sentence: %v", err)
	}
}

// TestNoiseStage runs the stage on a file store: text and labels files in,
// a CoNLL corpus and a report scored against the gold labels out.
func TestNoiseStage(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tagged, gold := noiseFixture()
	files := map[string][]byte{}
	for name, c := range map[string]*corpus.Corpus{"dist": tagged, "true": gold} {
		var text, labels strings.Builder
		for _, s := range c.Sentences {
			text.WriteString(strings.Join(s.Tokens, " ") + "\n")
			labels.WriteString(strings.Join(s.Tags, " ") + "\n")
		}
		files["text.txt"] = []byte(text.String())
		files[name+".txt"] = []byte(labels.String())
	}
	data := stagestest.ImportFiles(t, st, files)
	s, _ := stages.Lookup(StageNoise)
	p, err := s.ResolveParams(map[string]any{"drop": 1, "corpus_file": "text.txt", "corpus_labels": "dist.txt", "gold_file": "text.txt", "gold_labels": "true.txt"})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: p, Inputs: map[string][]stages.Artifact{"corpus": {data}, "gold": {data}}, OutputPrefix: "runs/noise/" + stages.NewAttemptID()})
	if err != nil {
		t.Fatal(err)
	}
	noisy := stages.NewInput(ctx, st, outs["noisy"])
	got, err := dataset.Source{}.ReadFrom(noisy, "noisy")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Sentences) != 3 || noisy.Meta[dataset.MetaFormat] != "conll" || strings.Trim(strings.Join(got.Sentences[0].Tags, ""), "O") != "" {
		t.Errorf("noisy corpus %+v (meta %v), want 3 sentences, entities dropped, in conll", got.Sentences, noisy.Meta)
	}
	txt, err := stages.NewInput(ctx, st, outs["report"]).ReadFile("report.txt")
	if err != nil || !strings.Contains(string(txt), "before") || !strings.Contains(string(txt), "100.00    62.50    76.92") {
		t.Errorf("report.txt %q, %v, want the scores before (P 100, R 62.5)", txt, err)
	}
}
