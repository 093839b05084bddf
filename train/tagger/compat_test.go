package tagger

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/dataset"
)

// The files of testdata/compat were written before the losses owned their
// hyperparameters (at 194f499): runs.json holds a TrainConfig of each kind
// as JSON (every loss's parameters were fields then), report.json a
// report of nerflow train, and tagger/ a tiny CRF tagger with its
// predictions of the fixture in predictions.json.

// An old run loads with its loss's parameters, and writes them back under
// the same names and values; the other losses' parameters, which it never
// read, are dropped.
func TestOldRunsLoad(t *testing.T) {
	b, err := os.ReadFile("testdata/compat/runs.json")
	if err != nil {
		t.Fatal(err)
	}
	var runs map[string]TrainConfig
	if err := json.Unmarshal(b, &runs); err != nil {
		t.Fatal(err)
	}
	var raw map[string]map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		head  string
		own   map[string]any
		check func(Loss) bool
	}{
		"ce":  {TokenHead, map[string]any{"tau": 0.7, "update_interval": int64(0)}, func(l Loss) bool { return l.(ceLoss).removes == noisyLabelRemoval{tau: 0.7} }},
		"gce": {TokenHead, map[string]any{"q": 0.6, "tau": 0.8, "update_interval": int64(200)}, func(l Loss) bool { return l.(gceLoss) == gceLoss{q: 0.6, removes: noisyLabelRemoval{200, 0.8}} }},
		"negsample": {SpanHead, map[string]any{"sampling": SamplingWeighted, "neg_ratio": 0.5, "mu": 4.0}, func(l Loss) bool {
			return reflect.DeepEqual(l.(negSampleLoss), negSampleLoss{sampling: SamplingWeighted, negRatio: 0.5, mu: 4})
		}},
		"partial": {CRFHead, map[string]any{"miss_rate": 0.3}, func(l Loss) bool { return l.(partialLoss).missRate == 0.3 }},
	} {
		run := runs[name]
		if !reflect.DeepEqual(run.LossParams, c.own) {
			t.Errorf("%s: loss params %v, want %v", name, run.LossParams, c.own)
		}
		l, err := configureLoss(run, c.head)
		if err != nil || !c.check(l) {
			t.Errorf("%s: loss %+v, %v", name, l, err)
		}
		again, err := json.Marshal(run)
		if err != nil {
			t.Fatal(err)
		}
		var written map[string]any
		if err := json.Unmarshal(again, &written); err != nil {
			t.Fatal(err)
		}
		for k, v := range raw[name] {
			_, own := c.own[k]
			if _, shared := written[k]; (shared || own) && written[k] != v {
				t.Errorf("%s: %s written back as %v, was %v", name, k, written[k], v)
			}
			if !own && lossParamDecls()[k].Name != "" && written[k] != nil {
				t.Errorf("%s: another loss's parameter %s written back", name, k)
			}
		}
		// A parameter the loss gained since (partial's per-type rates) is
		// written as a run that never set it writes it: at its default.
		fresh, err := json.Marshal(TrainConfig{Loss: run.Loss})
		if err != nil {
			t.Fatal(err)
		}
		var defaults map[string]any
		if err := json.Unmarshal(fresh, &defaults); err != nil {
			t.Fatal(err)
		}
		for k, v := range written {
			if _, ok := raw[name][k]; !ok && !reflect.DeepEqual(v, defaults[k]) {
				t.Errorf("%s: %s written as %v, not there before and not its default %v", name, k, v, defaults[k])
			}
		}
		var back TrainConfig
		if err := json.Unmarshal(again, &back); err != nil || !sameRun(t, back, run) {
			t.Errorf("%s: read back as %+v (%v), want %+v", name, back, err, run)
		}
	}
	if got := runs["partial"].EvalEvery; got != 50 {
		t.Errorf("partial: eval_every %d", got)
	}
}

// sameRun says whether two runs are the same, their loss's parameters
// compared as resolved (an absent one at its default).
func sameRun(t *testing.T, a, b TrainConfig) bool {
	t.Helper()
	l, err := lookupLoss(a.Loss)
	if err != nil {
		t.Fatal(err)
	}
	pa, errA := ownParams(l, a)
	pb, errB := ownParams(l, b)
	if errA != nil || errB != nil {
		t.Fatalf("resolving the loss's parameters: %v, %v", errA, errB)
	}
	a.LossParams, b.LossParams = nil, nil
	return reflect.DeepEqual(a, b) && reflect.DeepEqual(pa.Map(), pb.Map())
}

// An old report's run loads as the run it was.
func TestOldReportLoads(t *testing.T) {
	b, err := os.ReadFile("testdata/compat/report.json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Run TrainConfig `json:"run"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	want := TrainConfig{Loss: LossCE, LossParams: map[string]any{"tau": 0.7, "update_interval": int64(0)},
		Epochs: 3, BatchSize: 8, LearningRate: 0.01, Warmup: 0.1, MaxGradNorm: 5, Patience: 4, EvalEvery: 10, Seed: 1}
	if !reflect.DeepEqual(rep.Run, want) {
		t.Errorf("run %+v, want %+v", rep.Run, want)
	}
}

// A tagger saved before loads and predicts what it predicted then.
func TestOldTaggerPredictsTheSame(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "compat", "tagger"), gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, err := os.ReadFile("testdata/compat/predictions.json")
	if err != nil {
		t.Fatal(err)
	}
	var want []dataset.Prediction
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	got, err := m.Predict(fixtureCorpus(fixture), 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d predictions, want %d", len(got), len(want))
	}
	for i := range want {
		if !slices.Equal(got[i].Tags, want[i].Tags) {
			t.Errorf("sentence %d: tags %v, want %v", i+1, got[i].Tags, want[i].Tags)
		}
		for tok, row := range want[i].Probs {
			for j, p := range row {
				if math.Abs(float64(got[i].Probs[tok][j]-p)) > 1e-6 {
					t.Fatalf("sentence %d, token %d, tag %d: probability %v, want %v", i+1, tok+1, j, got[i].Probs[tok][j], p)
				}
			}
		}
	}
}
