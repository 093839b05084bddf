package tagger_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/train/tagger"
)

// A checkpoint that stage distant.overlay gave an overlay is scored by
// train.evaluate with the overlay's matches: the compat tagger finds no
// entity in the fixture, with the overlay it finds the gazetteer's 5
// matches of the 19 gold entities, all right (P 1, R 5/19).
func TestEvaluateStageWithOverlay(t *testing.T) {
	e := newStageEnv(t)
	model, err := stages.Import(e.ctx, e.st, "datasets", "testdata/compat/tagger", "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	var gold strings.Builder
	for _, s := range fixtureCorpus(fixture).Sentences {
		for i, tok := range s.Tokens {
			gold.WriteString(tok + " " + s.Tags[i] + "\n")
		}
		gold.WriteString("\n")
	}
	data := stagestest.ImportFiles(t, e.st, map[string][]byte{"gold.conll": []byte(gold.String())})
	gaz := stagestest.ImportFiles(t, e.st, map[string][]byte{"gaz.tsv": []byte("PER\tJohn Smith\nLOC\tParis\nLOC\tBerlin\n")})
	over, err := e.exec(distant.StageOverlay, map[string]any{"mode": "fill"}, map[string][]stages.Artifact{"model": {model}, "gazetteers": {gaz}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		model stages.Artifact
		f1    float64
	}{{model, 0}, {over["model"], 10.0 / 24}} {
		res, err := e.exec(tagger.StageEvaluate, map[string]any{"gold_file": "gold.conll"}, map[string][]stages.Artifact{"gold": {data}, "model": {c.model}})
		if err != nil {
			t.Fatal(err)
		}
		var r eval.Report
		if err := json.Unmarshal(e.read(res["report"], "report.json"), &r); err != nil {
			t.Fatal(err)
		}
		if math.Abs(r.Micro.F1-c.f1) > 1e-9 || r.Micro.Support != 19 {
			t.Errorf("model %s: F1 %v over %d entities, want %v over 19", c.model.Prefix, r.Micro.F1, r.Micro.Support, c.f1)
		}
	}
}
