package refine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/fsstore"
)

// conll writes a corpus as CoNLL text.
func conll(t *testing.T, c *corpus.Corpus) []byte {
	t.Helper()
	var b strings.Builder
	if err := corpus.Write(&b, c, corpus.FormatCoNLL); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// run runs stage name on the inputs and returns its outputs, read back.
func run(t *testing.T, st storage.Store, name string, params map[string]any, inputs map[string][]stages.Artifact) (map[string]*stages.Input, error) {
	t.Helper()
	ctx := context.Background()
	s, ok := stages.Lookup(name)
	if !ok {
		t.Fatalf("stage %s is not registered", name)
	}
	p, err := s.ResolveParams(params)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: p, Inputs: inputs, OutputPrefix: "runs/" + name + "/" + stages.NewAttemptID()})
	if err != nil {
		return nil, err
	}
	read := map[string]*stages.Input{}
	for port, a := range outs {
		read[port] = stages.NewInput(ctx, st, a)
	}
	return read, nil
}

func readCorpus(t *testing.T, in *stages.Input, port string) *corpus.Corpus {
	t.Helper()
	c, err := dataset.Source{}.ReadFrom(in, port)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStages runs the refinement as a method wires it: the folds of a
// corpus, their held sentences "predicted" (here with gold tags, which
// disagree with the false PER "The"), the vote, and the choice.
func TestStages(t *testing.T) {
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := voteFixture()
	gold := voteGold()
	// Sentences that mention none of those strings, so that every fold
	// has some to train on.
	for _, s := range []corpus.Sentence{sentence("Rome is old", "B-LOC O O"), sentence("Bob ran", "B-PER O"), sentence("Oslo", "B-LOC"), sentence("Ann sang", "B-PER O")} {
		c.Sentences = append(c.Sentences, s)
		gold.Sentences = append(gold.Sentences, s)
	}
	data := stagestest.ImportFiles(t, st, map[string][]byte{"train.conll": conll(t, c), "gold.conll": conll(t, gold)})
	in := map[string][]stages.Artifact{"corpus": {data}}

	var preds []stages.Artifact
	held := 0
	for fold := range 2 {
		outs, err := run(t, st, StageFolds, map[string]any{"folds": 2, "fold": fold, "corpus_file": "train.conll"}, in)
		if err != nil {
			t.Fatal(err)
		}
		h := readCorpus(t, outs["held"], "held")
		held += len(h.Sentences)
		// The held sentences tagged as gold tags them: a fold tagger that
		// gets every string right.
		for i, s := range h.Sentences {
			for _, g := range gold.Sentences {
				if strings.Join(g.Tokens, " ") == strings.Join(s.Tokens, " ") {
					h.Sentences[i].Tags = g.Tags
				}
			}
		}
		preds = append(preds, stagestest.ImportFiles(t, st, map[string][]byte{"tagged.conll": conll(t, h)}))
		if tr := readCorpus(t, outs["train"], "train"); outs["train"].Meta[dataset.MetaScheme] != "bio" || len(tr.Sentences) == 0 || len(tr.Sentences) > 8-len(h.Sentences) {
			t.Errorf("fold %d: train %d sentences (meta %v) beside %d held", fold, len(tr.Sentences), outs["train"].Meta, len(h.Sentences))
		}
	}
	if held != 8 {
		t.Errorf("the folds hold %d sentences, want all 8", held)
	}
	if _, err := run(t, st, StageFolds, map[string]any{"folds": 2, "fold": 2, "corpus_file": "train.conll"}, in); err == nil || !strings.Contains(err.Error(), "fold: 2 is not one of the 2 folds") {
		t.Errorf("fold 2 of 2: %v", err)
	}

	outs, err := run(t, st, StageVote, map[string]any{"corpus_file": "train.conll", "gold_file": "gold.conll"},
		map[string][]stages.Artifact{"corpus": {data}, "predictions": preds, "gold": {data}})
	if err != nil {
		t.Fatal(err)
	}
	// Fold taggers that predict no entity at all leave no typed label:
	// an error that says so, not a tagger failing downstream.
	none := &corpus.Corpus{}
	for _, s := range c.Sentences {
		none.Sentences = append(none.Sentences, sentence(strings.Join(s.Tokens, " "), strings.Repeat("O ", len(s.Tokens))))
	}
	_, err = run(t, st, StageVote, map[string]any{"corpus_file": "train.conll"}, map[string][]stages.Artifact{
		"corpus": {data}, "predictions": {stagestest.ImportFiles(t, st, map[string][]byte{"tagged.conll": conll(t, none)})}})
	if err == nil || !strings.Contains(err.Error(), "the fold taggers predicted none of the 6 labeled strings") {
		t.Errorf("no entity predicted: %v", err)
	}

	refined := readCorpus(t, outs["refined"], "refined")
	if got := strings.Join(refined.Sentences[2].Tags, " "); got != "B-LOC B-?" {
		t.Errorf("refined sentence 3: %s, want the false PER of unknown type", got)
	}
	var rep VoteReport
	if err := outs["report"].ReadJSON("report.json", &rep); err != nil {
		t.Fatal(err)
	}
	// After: the eight labels left are right, of nine gold entities.
	if rep.After == nil || rep.After.Micro.Precision != 1 || rep.After.Micro.Correct != 8 || rep.After.Micro.Support != 9 || rep.Predictions.Micro.F1 != 1 {
		t.Errorf("report %+v, want the refined labels' precision 1 and recall 0.8", rep)
	}
	txt, err := outs["report"].ReadFile("report.txt")
	if err != nil || !strings.Contains(string(txt), "labels after               100.00    88.89    94.12") || !strings.Contains(string(txt), "the                                       PER            3       0") {
		t.Errorf("report.txt %q, %v, want \"the\" listed as rejected", txt, err)
	}

	given := readCorpus(t, outs["given"], "given")
	if got := strings.Join(given.Sentences[2].Tags, " "); got != "B-LOC B-PER" || outs["given"].Meta[dataset.MetaLabels] != LabelsGiven || outs["refined"].Meta[dataset.MetaLabels] != LabelsRefined {
		t.Errorf("given sentence 3: %s (meta %v, refined's %v), want the labels as given", got, outs["given"].Meta, outs["refined"].Meta)
	}

	// The choice: the refined labels' tagger scored higher on dev, then
	// as high (a tie keeps the labels as given). The labels kept pass on
	// unchanged: the output has the kept input's digest, the engine's
	// cache key of what reads it.
	report := func(f1 float64) stages.Artifact {
		b, err := json.Marshal(eval.Report{Micro: eval.Score{F1: f1}})
		if err != nil {
			t.Fatal(err)
		}
		return stagestest.ImportFiles(t, st, map[string][]byte{"report.json": b})
	}
	sets := map[string][]stages.Artifact{LabelsGiven: {outs["given"].Artifact}, LabelsRefined: {outs["refined"].Artifact}}
	for _, tc := range []struct {
		given, refined float64
		want           string
	}{{0.6, 0.65, LabelsRefined}, {0.6, 0.6, LabelsGiven}} {
		chosen, err := run(t, st, StageChoose, nil, map[string][]stages.Artifact{
			"given": sets[LabelsGiven], "refined": sets[LabelsRefined], "given_report": {report(tc.given)}, "refined_report": {report(tc.refined)}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := chosen["corpus"].Digest, sets[tc.want][0].Digest; got != want || chosen["report"].Meta["kept"] != tc.want {
			t.Errorf("given %g, refined %g: corpus %s (report meta %v), want %s's %s", tc.given, tc.refined, got, chosen["report"].Meta, tc.want, want)
		}
	}

	// Inputs crossed over: the choice names the mistake.
	_, err = run(t, st, StageChoose, nil, map[string][]stages.Artifact{
		"given": sets[LabelsRefined], "refined": sets[LabelsGiven], "given_report": {report(0.5)}, "refined_report": {report(0.6)}})
	if err == nil || !strings.Contains(err.Error(), `input refined: meta labels="given", want "refined"`) {
		t.Errorf("crossed inputs: %v", err)
	}
}
