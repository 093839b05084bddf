package selftrain

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// pseudoCase is a teacher's predictions on tags [O, LOC, PER]:
//
//	a [0.95, 0.03, 0.02]  b [0.05, 0.9, 0.05]  c [0.5, 0.1, 0.4]  d [0.1, 0.2, 0.7]
var pseudoCase = [][][]float32{
	{{0.95, 0.03, 0.02}, {0.05, 0.9, 0.05}},
	{},
	{{0.5, 0.1, 0.4}, {0.1, 0.2, 0.7}},
}

// checkTargets compares targets with want, nil rows included.
func checkTargets(t *testing.T, got [][][]float32, want [][][]float64) {
	t.Helper()
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("sentence %d: %d tokens, want %d", i+1, len(got[i]), len(want[i]))
		}
		for tok, row := range want[i] {
			if (row == nil) != (got[i][tok] == nil) {
				t.Errorf("sentence %d token %d: %v, want %v", i+1, tok+1, got[i][tok], row)
				continue
			}
			for c, x := range row {
				if d := math.Abs(float64(got[i][tok][c]) - x); d > 1e-5 {
					t.Errorf("sentence %d token %d value %d: %v, want %v", i+1, tok+1, c, got[i][tok][c], x)
				}
			}
		}
	}
}

// Hard pseudo-labels at threshold 0.9: a (O, 0.95) and b (LOC, 0.9, kept
// at the threshold) one-hot; c (0.5) and d (0.7) left out.
func TestHardPseudoLabels(t *testing.T) {
	got, sel, err := PseudoLabels(pseudoCase, Pseudo{Labels: LabelsHard, Threshold: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	checkTargets(t, got, [][][]float64{{{1, 0, 0}, {0, 1, 0}}, {}, {nil, nil}})
	if sel != (Selection{Tokens: 4, Kept: 2, Entities: 1}) {
		t.Errorf("selection %+v, want 4 tokens, 2 kept, 1 entity", sel)
	}
}

// Soft pseudo-labels: the frequencies over the corpus are f = [0.95 +
// 0.05 + 0.5 + 0.1, 0.03 + 0.9 + 0.1 + 0.2, 0.02 + 0.05 + 0.4 + 0.7] =
// [1.6, 1.23, 1.17]; d becomes [0.01/1.6, 0.04/1.23, 0.49/1.17] =
// [0.00625, 0.0325203, 0.4188034] / 0.4575737 = [0.013659, 0.071071,
// 0.915270], kept at 0.9 though the teacher gave it 0.7; c becomes
// [0.25/1.6, 0.01/1.23, 0.16/1.17] / 0.3011322 = [0.518875, 0.026998,
// 0.454127], left out.
func TestSoftPseudoLabels(t *testing.T) {
	got, sel, err := PseudoLabels(pseudoCase, Pseudo{Labels: LabelsSoft, Threshold: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	checkTargets(t, got, [][][]float64{
		{{0.998100, 0.001295, 0.000605}, {0.002359, 0.994414, 0.003227}},
		{},
		{nil, {0.013659, 0.071071, 0.915270}},
	})
	if sel != (Selection{Tokens: 4, Kept: 3, Entities: 2}) {
		t.Errorf("selection %+v, want 4 tokens, 3 kept, 2 entities", sel)
	}
	// Threshold 0 keeps every token: c too.
	got, sel, err = PseudoLabels(pseudoCase, Pseudo{Labels: LabelsSoft, Threshold: 0})
	if err != nil {
		t.Fatal(err)
	}
	checkTargets(t, got[2:], [][][]float64{{{0.518875, 0.026998, 0.454127}, {0.013659, 0.071071, 0.915270}}})
	if sel.Kept != 4 {
		t.Errorf("threshold 0 kept %d of 4", sel.Kept)
	}
}

func TestPseudoLabelsErrors(t *testing.T) {
	for _, tc := range []struct {
		probs [][][]float32
		ps    Pseudo
		want  string
	}{
		{pseudoCase, Pseudo{Labels: LabelsHard, Threshold: 1.5}, "threshold 1.5"},
		{pseudoCase, Pseudo{Labels: "fuzzy", Threshold: 0.9}, `"fuzzy"`},
		{[][][]float32{{{0.5, 0.5}}, {{0.2, 0.3, 0.5}}}, Pseudo{Labels: LabelsSoft, Threshold: 0.9}, "sentence 2, token 1: 3 probabilities, want 2"},
		{[][][]float32{{{1}}}, Pseudo{Labels: LabelsHard, Threshold: 0.9}, "O and at least one entity tag"},
	} {
		if _, _, err := PseudoLabels(tc.probs, tc.ps); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one with %q", tc.ps, err, tc.want)
		}
	}
}

// The student replaces the teacher every Period steps: 6 sentences in
// batches of 2 are 3 steps an epoch, so over 2 epochs with period 2 the
// teachers are the model as given and the student after steps 2 and 4
// (before steps 3 and 5). Each new teacher's selection is that of the
// student's predictions at that step, for a token head and for a CRF.
func TestTeacherReplacedEveryPeriod(t *testing.T) {
	for _, head := range []string{tagger.TokenHead, tagger.CRFHead} {
		t.Run(head, func(t *testing.T) {
			m := tinyTaggerWith(t, head)
			c := fixtureCorpus()
			cfg := DefaultTeacherConfig()
			cfg.Run.Epochs, cfg.Run.BatchSize, cfg.Run.LearningRate, cfg.Run.EvalEvery = 2, 2, 0.01, 0
			cfg.Period, cfg.Pseudo = 2, Pseudo{Labels: LabelsHard, Threshold: 0.6}
			want := map[int]Selection{}
			atStep := func(step int) {
				preds, err := m.Predict(c, 64)
				if err != nil {
					t.Fatal(err)
				}
				if head == tagger.CRFHead {
					_, want[step], err = CRFPseudoLabels(preds, m.Labels.Tags, cfg.Pseudo)
				} else {
					_, want[step], err = PseudoLabels(probsOf(preds), cfg.Pseudo)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			atStep(0)
			res, err := TrainStudent(context.Background(), m, c, nil, cfg, trainProgress(func(step int) {
				if step == 2 || step == 4 {
					atStep(step)
				}
			}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Steps != 6 || len(res.Teachers) != 3 {
				t.Fatalf("%d steps, %d teachers: want 6 steps and 3 teachers (the model, after steps 2 and 4)", res.Steps, len(res.Teachers))
			}
			for i, step := range []int{0, 2, 4} {
				if res.Teachers[i] != want[step] {
					t.Errorf("teacher %d: %+v, want the selection of the model at step %d, %+v", i+1, res.Teachers[i], step, want[step])
				}
			}
			t.Logf("teachers %+v", res.Teachers)
		})
	}
}

// A CRF student fits its teacher's sets: with one teacher for the whole
// run (the period exceeds it), the loss of its pseudo-labels goes down,
// for hard labels and for soft ones (credible sets, at a threshold some
// tokens of the tiny teacher do not reach with two tags of three).
func TestCRFStudentLowersLoss(t *testing.T) {
	for labels, threshold := range map[string]float64{LabelsHard: 0.6, LabelsSoft: 0.95} {
		t.Run(labels, func(t *testing.T) {
			m := tinyTaggerWith(t, tagger.CRFHead)
			cfg := DefaultTeacherConfig()
			cfg.Run.Epochs, cfg.Run.BatchSize, cfg.Run.LearningRate, cfg.Run.EvalEvery = 5, 2, 0.01, 0
			cfg.Period, cfg.Pseudo = 1000, Pseudo{Labels: labels, Threshold: threshold}
			res, err := TrainStudent(context.Background(), m, fixtureCorpus(), nil, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Teachers) != 1 || res.Teachers[0].Kept == 0 || res.Teachers[0].Kept == res.Teachers[0].Tokens {
				t.Fatalf("teachers %+v: want one that keeps some tokens and leaves others free", res.Teachers)
			}
			first, last := res.Epochs[0].TrainLoss, res.Epochs[len(res.Epochs)-1].TrainLoss
			if !(last < first) || math.IsNaN(last) || first <= 0 {
				t.Errorf("student loss from %v to %v, want positive and lower", first, last)
			}
			t.Logf("teacher %+v, student loss %v -> %v over %d steps", res.Teachers[0], first, last, res.Steps)
		})
	}
}

// TrainStudent refuses a head it has no pseudo-labels for.
func TestTrainStudentRefusesSpanHead(t *testing.T) {
	m := tinyTaggerWith(t, tagger.SpanHead)
	_, err := TrainStudent(context.Background(), m, fixtureCorpus(), nil, DefaultTeacherConfig())
	if err == nil || !strings.Contains(err.Error(), "not "+tagger.SpanHead) {
		t.Errorf("error %v, want one refusing the %s head", err, tagger.SpanHead)
	}
}

// crfCase is a CRF teacher's predictions on tags [O, LOC, PER]: Viterbi
// tags and marginals.
//
//	a O   [0.95, 0.03, 0.02]  b LOC [0.05, 0.9, 0.05]
//	c O   [0.5, 0.05, 0.45]   d PER [0.08, 0.22, 0.7]   e O [0.4, 0.45, 0.15]
var crfCase = []tagger.Prediction{
	{Tags: []string{"O", "LOC"}, Probs: [][]float32{{0.95, 0.03, 0.02}, {0.05, 0.9, 0.05}}},
	{Tags: []string{}, Probs: [][]float32{}},
	{Tags: []string{"O", "PER", "O"}, Probs: [][]float32{{0.5, 0.05, 0.45}, {0.08, 0.22, 0.7}, {0.4, 0.45, 0.15}}},
}

var crfTags = []string{"O", "LOC", "PER"}

// Hard CRF pseudo-labels are the Viterbi tags whose marginal reaches the
// threshold: at 0.9, a (O) and b (LOC, kept at the threshold); c, d and e
// are left free. At 0.4, c (O at 0.5), d (PER at 0.7) and e, whose Viterbi
// tag O has 0.4 though LOC's marginal is larger, are kept with their
// Viterbi tag.
func TestCRFHardPseudoLabels(t *testing.T) {
	got, sel, err := CRFPseudoLabels(crfCase, crfTags, Pseudo{Labels: LabelsHard, Threshold: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	checkTargets(t, got, [][][]float64{{{1, 0, 0}, {0, 1, 0}}, {}, {nil, nil, nil}})
	if sel != (Selection{Tokens: 5, Kept: 2, Entities: 1}) {
		t.Errorf("selection %+v, want 5 tokens, 2 kept, 1 entity", sel)
	}
	got, sel, err = CRFPseudoLabels(crfCase, crfTags, Pseudo{Labels: LabelsHard, Threshold: 0.4})
	if err != nil {
		t.Fatal(err)
	}
	checkTargets(t, got[2:], [][][]float64{{{1, 0, 0}, {0, 0, 1}, {1, 0, 0}}})
	if sel != (Selection{Tokens: 5, Kept: 5, Entities: 2}) {
		t.Errorf("threshold 0.4: selection %+v, want 5 tokens, 5 kept, 2 entities", sel)
	}
}

// Soft CRF pseudo-labels are credible sets: at 0.9, a {O} (0.95) and b
// {LOC} (0.9) alone; c {O, PER} (0.5 + 0.45 = 0.95: LOC ruled out); d
// {PER, LOC} (0.7 + 0.22 = 0.92: O ruled out, an entity); e needs all three
// tags (0.45 + 0.4 = 0.85 < 0.9), so it is left free. At 0.96 a needs
// {O, LOC} (0.98); at 0 every token keeps its largest marginal's tag,
// e's LOC too.
func TestCRFSoftPseudoLabels(t *testing.T) {
	got, sel, err := CRFPseudoLabels(crfCase, crfTags, Pseudo{Labels: LabelsSoft, Threshold: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	checkTargets(t, got, [][][]float64{{{1, 0, 0}, {0, 1, 0}}, {}, {{1, 0, 1}, {0, 1, 1}, nil}})
	if sel != (Selection{Tokens: 5, Kept: 4, Entities: 2}) {
		t.Errorf("selection %+v, want 5 tokens, 4 kept, 2 entities (b, d)", sel)
	}
	got, _, err = CRFPseudoLabels(crfCase, crfTags, Pseudo{Labels: LabelsSoft, Threshold: 0.96})
	if err != nil {
		t.Fatal(err)
	}
	// b's two largest marginals add up to 0.95: free.
	checkTargets(t, got[:1], [][][]float64{{{1, 1, 0}, nil}})
	got, sel, err = CRFPseudoLabels(crfCase, crfTags, Pseudo{Labels: LabelsSoft, Threshold: 0})
	if err != nil {
		t.Fatal(err)
	}
	checkTargets(t, got[2:], [][][]float64{{{1, 0, 0}, {0, 0, 1}, {0, 1, 0}}})
	if sel.Kept != 5 || sel.Entities != 3 {
		t.Errorf("threshold 0: selection %+v, want 5 kept, 3 entities", sel)
	}
}

// With miss_rate, a token whose kept set is O alone gets the weak O row
// [1, m, m], as loss partial weighs a distant O; entity sets and sets of O
// with an entity tag are unchanged, and so are the selection's counts.
// Hard at 0.9: a (O at 0.95) is weak, b (LOC) stays; at 0.4, c (O at 0.5)
// and e (Viterbi O at 0.4) are weak too. Soft at 0.9: a's set {O} is weak,
// c's {O, PER} stays. At miss_rate 1 a weak O says nothing: a is left
// free and not counted as kept.
func TestCRFPseudoLabelsWeakO(t *testing.T) {
	const m = 0.25
	for _, tc := range []struct {
		ps   Pseudo
		want [][][]float64
		sel  Selection
	}{
		{Pseudo{Labels: LabelsHard, Threshold: 0.9, OMissRate: m},
			[][][]float64{{{1, m, m}, {0, 1, 0}}, {}, {nil, nil, nil}}, Selection{Tokens: 5, Kept: 2, Entities: 1}},
		{Pseudo{Labels: LabelsHard, Threshold: 0.4, OMissRate: m},
			[][][]float64{{{1, m, m}, {0, 1, 0}}, {}, {{1, m, m}, {0, 0, 1}, {1, m, m}}}, Selection{Tokens: 5, Kept: 5, Entities: 2}},
		{Pseudo{Labels: LabelsSoft, Threshold: 0.9, OMissRate: m},
			[][][]float64{{{1, m, m}, {0, 1, 0}}, {}, {{1, 0, 1}, {0, 1, 1}, nil}}, Selection{Tokens: 5, Kept: 4, Entities: 2}},
		{Pseudo{Labels: LabelsSoft, Threshold: 0.9, OMissRate: 1},
			[][][]float64{{nil, {0, 1, 0}}, {}, {{1, 0, 1}, {0, 1, 1}, nil}}, Selection{Tokens: 5, Kept: 3, Entities: 2}},
		{Pseudo{Labels: LabelsHard, Threshold: 0.9, OMissRate: 1},
			[][][]float64{{nil, {0, 1, 0}}, {}, {nil, nil, nil}}, Selection{Tokens: 5, Kept: 1, Entities: 1}},
	} {
		got, sel, err := CRFPseudoLabels(crfCase, crfTags, tc.ps)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", tc.ps)
		checkTargets(t, got, tc.want)
		if sel != tc.sel {
			t.Errorf("%+v: selection %+v, want %+v", tc.ps, sel, tc.sel)
		}
	}
}

// miss_rate weighs a CRF student's evidence: a token head's KL student
// has none, so TrainStudent refuses it there rather than ignore it.
func TestTrainStudentRefusesWeakOWithTokenHead(t *testing.T) {
	m := tinyTaggerWith(t, tagger.TokenHead)
	cfg := DefaultTeacherConfig()
	cfg.Pseudo.OMissRate = 0.5
	_, err := TrainStudent(context.Background(), m, fixtureCorpus(), nil, cfg)
	if err == nil || !strings.Contains(err.Error(), "miss_rate 0.5") {
		t.Errorf("error %v, want one refusing miss_rate with the %s head", err, tagger.TokenHead)
	}
}

// The stage reads miss_rate into the teacher's pseudo-labels; its
// default is the hard O.
func TestTeacherStageReadsOMissRate(t *testing.T) {
	s, _ := stages.Lookup(StageTeacher)
	for _, tc := range []struct {
		params map[string]any
		want   float64
	}{{map[string]any{}, 0}, {map[string]any{"miss_rate": 0.3}, 0.3}} {
		p, err := s.ResolveParams(tc.params)
		if err != nil {
			t.Fatal(err)
		}
		if got := teacherConfigOf(p).Pseudo.OMissRate; got != tc.want {
			t.Errorf("params %v: miss_rate %v, want %v", tc.params, got, tc.want)
		}
	}
}

func TestCRFPseudoLabelsErrors(t *testing.T) {
	for _, tc := range []struct {
		preds []tagger.Prediction
		tags  []string
		ps    Pseudo
		want  string
	}{
		{crfCase, crfTags, Pseudo{Labels: LabelsHard, Threshold: -0.1}, "threshold -0.1"},
		{crfCase, crfTags, Pseudo{Labels: "fuzzy", Threshold: 0.9}, `"fuzzy"`},
		{crfCase, crfTags, Pseudo{Labels: LabelsSoft, Threshold: 0.9, OMissRate: 1.5}, "miss_rate 1.5"},
		{crfCase, []string{"O"}, Pseudo{Labels: LabelsHard, Threshold: 0.9}, "at least one entity tag"},
		{crfCase, []string{"O", "LOC"}, Pseudo{Labels: LabelsSoft, Threshold: 0.9}, "sentence 1, token 1: 3 probabilities for the 2 tags"},
		{crfCase, []string{"O", "LOC", "ORG"}, Pseudo{Labels: LabelsHard, Threshold: 0.9}, `sentence 3, token 2: tag "PER" is not in the tag set`},
		{[]tagger.Prediction{{Tags: []string{"O"}, Probs: [][]float32{}}}, crfTags, Pseudo{Labels: LabelsHard, Threshold: 0.9}, "sentence 1: 1 tags and 0 distributions"},
	} {
		if _, _, err := CRFPseudoLabels(tc.preds, tc.tags, tc.ps); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %+v: error %v, want one with %q", tc.tags, tc.ps, err, tc.want)
		}
	}
}

// The automatic period is half an epoch, at least 25 steps, and the
// automatic dev interval is the period: 220 steps on CoNLL-2003 (439 steps
// an epoch at batches of 32), 25 on an 800-sentence corpus (25 steps an
// epoch). Given values stay.
func TestAutoPeriodFollowsTheCorpusSize(t *testing.T) {
	for spe, want := range map[int]int{439: 220, 25: 25} {
		cfg := DefaultTeacherConfig().withSteps(spe)
		if cfg.Period != want || cfg.Run.EvalEvery != want {
			t.Errorf("%d steps an epoch: period %d, eval every %d; want %d for both", spe, cfg.Period, cfg.Run.EvalEvery, want)
		}
	}
	cfg := DefaultTeacherConfig()
	cfg.Period, cfg.Run.EvalEvery = 40, 0
	if got := cfg.withSteps(439); got.Period != 40 || got.Run.EvalEvery != 0 {
		t.Errorf("given period 40 and per-epoch scores became %d and %d", got.Period, got.Run.EvalEvery)
	}
}

// TrainStudent resolves the period on the corpus it trains on: the tiny
// fixture's 6 sentences in batches of 2 are 3 steps an epoch, so the
// period is the floor, 25 steps, longer than the run's 6: one teacher.
func TestTrainStudentResolvesAutoPeriod(t *testing.T) {
	m := tinyTagger(t)
	cfg := DefaultTeacherConfig()
	cfg.Run.Epochs, cfg.Run.BatchSize, cfg.Run.LearningRate = 2, 2, 0.01
	cfg.Pseudo.Threshold = 0.6
	res, err := TrainStudent(context.Background(), m, fixtureCorpus(), fixtureCorpus(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Period != AutoPeriodMinSteps || len(res.Teachers) != 1 || res.Steps != 6 || res.EvalEvery != AutoPeriodMinSteps {
		t.Errorf("period %d, %d teachers, %d steps, eval every %d: want period %d, 1 teacher, 6 steps, eval every %d",
			res.Period, len(res.Teachers), res.Steps, res.EvalEvery, AutoPeriodMinSteps, AutoPeriodMinSteps)
	}
}
