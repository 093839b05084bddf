package eval

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
)

func seqs(lines ...string) [][]string {
	out := make([][]string, len(lines))
	for i, l := range lines {
		out[i] = strings.Fields(l)
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func checkScore(t *testing.T, name string, got Score, p, r, f float64, support, predicted, correct int) {
	t.Helper()
	if !near(got.Precision, p) || !near(got.Recall, r) || !near(got.F1, f) || got.Support != support || got.Predicted != predicted || got.Correct != correct {
		t.Errorf("%s = %+v; want P %.4f R %.4f F1 %.4f support %d predicted %d correct %d", name, got, p, r, f, support, predicted, correct)
	}
}

// TestHandComputed: gold PER[0,2) LOC[3,4) | ORG[0,3); predicted PER[0,2)
// ORG[3,4) | ORG[0,2). One of three entities matches on each side; 6 of 8
// tags match. conlleval prints for this input:
//
//	processed 8 tokens with 3 phrases; found: 3 phrases; correct: 1.
//	accuracy:  75.00%; precision:  33.33%; recall:  33.33%; FB1:  33.33
//	              LOC: precision:   0.00%; recall:   0.00%; FB1:   0.00
//	              ORG: precision:   0.00%; recall:   0.00%; FB1:   0.00
//	              PER: precision: 100.00%; recall: 100.00%; FB1: 100.00
func TestHandComputed(t *testing.T) {
	gold := seqs("B-PER I-PER O B-LOC", "B-ORG I-ORG I-ORG O")
	pred := seqs("B-PER I-PER O B-ORG", "B-ORG I-ORG O O")
	r, err := Evaluate(gold, pred, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sentences != 2 || r.Tokens != 8 || !near(r.TokenAccuracy, 0.75) || r.Scheme != "bio" {
		t.Errorf("header %+v", r)
	}
	checkScore(t, "micro", r.Micro, 1.0/3, 1.0/3, 1.0/3, 3, 3, 1)
	checkScore(t, "PER", r.Types["PER"], 1, 1, 1, 1, 1, 1)
	checkScore(t, "LOC", r.Types["LOC"], 0, 0, 0, 1, 0, 0)
	checkScore(t, "ORG", r.Types["ORG"], 0, 0, 0, 1, 2, 0)
	if names := strings.Join(r.TypeNames(), " "); names != "LOC ORG PER" {
		t.Errorf("types %q", names)
	}

	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := `type       precision   recall       f1  support  predicted  correct
LOC             0.00     0.00     0.00        1          0        0
ORG             0.00     0.00     0.00        1          2        0
PER           100.00   100.00   100.00        1          1        1
micro avg      33.33    33.33    33.33        3          3        1

2 sentences, 8 tokens, token accuracy 75.00% (scheme bio)
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}

	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Micro != r.Micro || back.Types["ORG"] != r.Types["ORG"] || !strings.Contains(string(js), `"token_accuracy":0.75`) ||
		!strings.Contains(string(js), `"PER":{"precision":1,"recall":1,"f1":1,"support":1,"predicted":1,"correct":1}`) {
		t.Errorf("JSON %s", js)
	}
}

// TestConllevalEdgeCases scores the sequences on which conlleval's reading
// of tags matters.
func TestConllevalEdgeCases(t *testing.T) {
	cases := []struct {
		name                        string
		scheme                      corpus.Scheme
		gold, pred                  string
		support, predicted, correct int
	}{
		// I- after O starts an entity, so a tagger that never emits B- is
		// still right on isolated entities.
		{"I after O", corpus.BIO, "B-PER I-PER O", "I-PER I-PER O", 1, 1, 1},
		// ... and I- after another type starts a new one.
		{"I after other type", corpus.BIO, "B-PER B-LOC I-LOC", "B-PER I-LOC I-LOC", 2, 2, 2},
		{"type change inside", corpus.BIO, "B-PER I-PER", "B-PER I-LOC", 1, 2, 0},
		// B- after I- of the same type splits.
		{"split", corpus.BIO, "B-PER I-PER I-PER", "B-PER I-PER B-PER", 1, 2, 0},
		{"IOB1 split", corpus.IOB1, "I-PER I-PER B-PER", "I-PER I-PER I-PER", 2, 1, 0},
		{"IOB1 same", corpus.IOB1, "I-PER O I-PER B-PER", "I-PER O I-PER B-PER", 3, 3, 3},
		// Boundaries must match exactly.
		{"short", corpus.BIO, "B-ORG I-ORG I-ORG", "B-ORG I-ORG O", 1, 1, 0},
		{"long", corpus.BIO, "O B-ORG O", "B-ORG I-ORG O", 1, 1, 0},
		// IO: adjacent same-type entities are one.
		{"IO", corpus.IO, "I-PER I-PER O I-LOC I-PER", "I-PER I-PER O I-LOC I-LOC", 3, 2, 1},
		// BIOES, including an unfinished prediction, which still counts.
		{"BIOES", corpus.BIOES, "B-PER E-PER S-LOC", "B-PER I-PER S-LOC", 2, 2, 2},
		{"BIOES E after E", corpus.BIOES, "B-PER E-PER", "E-PER E-PER", 1, 2, 0},
		{"BIOES S S", corpus.BIOES, "S-PER S-PER", "B-PER E-PER", 2, 1, 0},
		{"empty", corpus.BIO, "O O", "O O", 0, 0, 0},
	}
	for _, c := range cases {
		r, err := Evaluate(seqs(c.gold), seqs(c.pred), c.scheme)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		m := r.Micro
		if m.Support != c.support || m.Predicted != c.predicted || m.Correct != c.correct {
			t.Errorf("%s: gold %q pred %q: support %d predicted %d correct %d; want %d %d %d",
				c.name, c.gold, c.pred, m.Support, m.Predicted, m.Correct, c.support, c.predicted, c.correct)
		}
	}
}

func TestRatesAndZeroes(t *testing.T) {
	// 4 gold, 2 predicted, both right: P 1, R 1/2, F1 2/3.
	r, err := Evaluate(seqs("B-A O B-A O B-A O B-A"), seqs("B-A O B-A O O O O"), corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	checkScore(t, "micro", r.Micro, 1, 0.5, 2.0/3, 4, 2, 2)
	if !near(r.TokenAccuracy, 5.0/7) {
		t.Errorf("accuracy %v", r.TokenAccuracy)
	}
	// Nothing predicted, nothing gold: all zero, no NaN.
	r, err = Evaluate(seqs("O"), seqs("O"), corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	checkScore(t, "micro", r.Micro, 0, 0, 0, 0, 0, 0)
	if len(r.Types) != 0 {
		t.Errorf("types %v", r.Types)
	}
	// No sentence at all.
	if r := NewScorer(corpus.BIO).Report(); r.TokenAccuracy != 0 || r.Micro != (Score{}) {
		t.Errorf("empty report %+v", r)
	}
}

func TestErrors(t *testing.T) {
	_, err := Evaluate(seqs("O O", "O"), seqs("O O", "O O"), corpus.BIO)
	if !errors.Is(err, ErrLengthMismatch) || err.Error() != "sentence 2: 1 gold tags but 2 predicted: gold and predicted tags differ in number" {
		t.Errorf("length: %v", err)
	}
	_, err = Evaluate(seqs("O"), seqs("O", "O"), corpus.BIO)
	if !errors.Is(err, ErrLengthMismatch) {
		t.Errorf("sentences: %v", err)
	}
	_, err = Evaluate(seqs("O S-PER"), seqs("O O"), corpus.BIO)
	if !errors.Is(err, corpus.ErrUnknownTag) || !strings.HasPrefix(err.Error(), "sentence 1: gold tag 2: ") {
		t.Errorf("unknown gold tag: %v", err)
	}
	_, err = Evaluate(seqs("O O"), seqs("O PER"), corpus.AnyScheme)
	if !errors.Is(err, corpus.ErrUnknownTag) || !strings.HasPrefix(err.Error(), "sentence 1: predicted tag 2: ") {
		t.Errorf("unknown predicted tag: %v", err)
	}
	s := NewScorer(corpus.BIO)
	_ = s.Add([]string{"B-A"}, []string{"B-A"})
	_ = s.Add([]string{"B-A", "O"}, []string{"B-A", "E-A"})
	if r := s.Report(); r.Sentences != 1 || r.Micro.Correct != 1 {
		t.Errorf("a failed Add was counted: %+v", r)
	}
}

// conllevalCounts is an independent transcription of conlleval.pl's
// token-by-token counting (its endOfChunk/startOfChunk rules, in the version
// that knows E- and S-, and its inCorrect state machine), used to check that
// Scorer's span matching gives the same counts on any input.
func conllevalCounts(gold, pred [][]string) (found, guessed, correct int) {
	split := func(tag string) (string, string) {
		p, typ, _ := strings.Cut(tag, "-")
		return p, typ
	}
	type pair struct{ a, b string }
	endRules := map[pair]bool{}
	for _, r := range []string{"B B", "B O", "B S", "I B", "I S", "I O", "E E", "E I", "E O", "E S", "E B", "S E", "S I", "S O", "S S", "S B"} {
		f := strings.Fields(r)
		endRules[pair{f[0], f[1]}] = true
	}
	startRules := map[pair]bool{}
	for _, r := range []string{"B B", "I B", "O B", "S B", "E B", "B S", "I S", "O S", "S S", "E S", "O I", "S I", "E I", "S E", "E E", "O E"} {
		f := strings.Fields(r)
		startRules[pair{f[0], f[1]}] = true
	}
	end := func(prev, cur, prevType, curType string) bool {
		return endRules[pair{prev, cur}] || (prev != "O" && prevType != curType)
	}
	start := func(prev, cur, prevType, curType string) bool {
		return startRules[pair{prev, cur}] || (cur != "O" && prevType != curType)
	}
	lastC, lastCT, lastG, lastGT := "O", "", "O", ""
	inCorrect := false
	step := func(c, ct, g, gt string) {
		if inCorrect {
			endC, endG := end(lastC, c, lastCT, ct), end(lastG, g, lastGT, gt)
			if endC && endG && lastGT == lastCT {
				inCorrect = false
				correct++
			} else if endC != endG || gt != ct {
				inCorrect = false
			}
		}
		startC, startG := start(lastC, c, lastCT, ct), start(lastG, g, lastGT, gt)
		if startC && startG && gt == ct {
			inCorrect = true
		}
		if startC {
			found++
		}
		if startG {
			guessed++
		}
		lastC, lastCT, lastG, lastGT = c, ct, g, gt
	}
	for i := range gold {
		for j := range gold[i] {
			c, ct := split(gold[i][j])
			g, gt := split(pred[i][j])
			step(c, ct, g, gt)
		}
		step("O", "", "O", "") // the sentence boundary line
	}
	if inCorrect {
		correct++
	}
	return found, guessed, correct
}

func TestAgreesWithConllevalAlgorithm(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	tags := []string{"O", "O", "O", "B-A", "I-A", "E-A", "S-A", "B-B", "I-B", "E-B", "S-B"}
	for trial := range 2000 {
		var gold, pred [][]string
		for range 1 + rng.IntN(3) {
			n := 1 + rng.IntN(8)
			g, p := make([]string, n), make([]string, n)
			for k := range n {
				g[k] = tags[rng.IntN(len(tags))]
				p[k] = g[k]
				if rng.IntN(3) == 0 { // perturb a third of the predictions
					p[k] = tags[rng.IntN(len(tags))]
				}
			}
			gold, pred = append(gold, g), append(pred, p)
		}
		r, err := Evaluate(gold, pred, corpus.AnyScheme)
		if err != nil {
			t.Fatal(err)
		}
		found, guessed, correct := conllevalCounts(gold, pred)
		if r.Micro.Support != found || r.Micro.Predicted != guessed || r.Micro.Correct != correct {
			t.Fatalf("trial %d: gold %q pred %q: got %d/%d/%d, conlleval %d/%d/%d", trial, gold, pred,
				r.Micro.Support, r.Micro.Predicted, r.Micro.Correct, found, guessed, correct)
		}
	}
}

// The comparison lists every type of either report, the baseline's too,
// with the F1 gain in points.
func TestWriteComparison(t *testing.T) {
	model := Report{Micro: Score{Precision: 0.5, Recall: 1, F1: 2.0 / 3}, Types: map[string]Score{"PER": {Precision: 0.5, Recall: 1, F1: 2.0 / 3}}}
	labels := Report{Micro: Score{Precision: 1, Recall: 0.25, F1: 0.4}, Types: map[string]Score{"PER": {Precision: 1, Recall: 0.5, F1: 2.0 / 3}, "LOC": {}}}
	var b strings.Builder
	if err := model.WriteComparison(&b, labels, "labels"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"PER          50.00  100.00   66.67   100.00   50.00   66.67    +0.00",
		"LOC           0.00    0.00    0.00     0.00    0.00    0.00    +0.00",
		"micro avg    50.00  100.00   66.67   100.00   25.00   40.00   +26.67",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("comparison lacks %q:\n%s", want, b.String())
		}
	}
}
