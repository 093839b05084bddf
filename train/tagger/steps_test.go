package tagger

import (
	"slices"
	"testing"
)

// TestStepsTrainAndPredict: Steps' batches hold every sentence once, its
// steps teach a tiny CRF the fixture, and its prediction is the tagger's.
func TestStepsTrainAndPredict(t *testing.T) {
	c := fixtureCorpus(fixture)
	m := newTiny(t, c, tinyConfig(CRFHead, "bio"), 1)
	run := tinyTrainConfig(LossCRF)
	st, err := NewSteps(m, c, run, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	batches := st.Batches(run.BatchSize, 1)
	var seen []int
	tokens := 0
	for _, ids := range batches {
		seen = append(seen, ids...)
		for _, s := range st.Sentences(ids) {
			tokens += len(s)
		}
	}
	slices.Sort(seen)
	want := make([]int, len(c.Sentences))
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("batches hold sentences %v, want each of the %d once", seen, len(c.Sentences))
	}
	if got := st.Tokens(batches); got != tokens || tokens == 0 {
		t.Fatalf("Tokens = %d, the sentences have %d", got, tokens)
	}

	correct := func() int {
		preds, err := m.Predict(c, 3)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, s := range c.Sentences {
			for j, tag := range s.Tags {
				if preds[i].Tags[j] == tag {
					n++
				}
			}
		}
		return n
	}
	before := correct()
	for range 30 {
		if err := st.Train(batches); err != nil {
			t.Fatal(err)
		}
	}
	after := correct()
	if after <= before || float64(after) < 0.9*float64(tokens) {
		t.Fatalf("correct tags %d before the steps, %d after, of %d: want most learned", before, after, tokens)
	}

	if err := st.Predict(batches); err != nil {
		t.Fatal(err)
	}
	preds, err := m.Predict(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range preds {
		if !slices.Equal(st.out[i].Tags, preds[i].Tags) {
			t.Fatalf("sentence %d: Steps predicts %v, the tagger %v", i, st.out[i].Tags, preds[i].Tags)
		}
	}
}
