package methods_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/train/tagger"
)

const autonerSpec = `
name: a
method: autoner
params: {seeds: [1, 2], miss_rate: 0, case: variants, dev_file: test.conll, test_file: test.conll}
inputs:
  train: ../../data/raw.txt
  gazetteers: [../../data/gaz/per.txt, ../../data/gaz/loc.txt]
  dev: ../../data
  test: ../../data
`

// AutoNER labels the train input twice with one matching rule: BIO tags
// with "?" for the Fuzzy-LSTM-CRF, and the Tie-or-Break labels; the fuzzy
// taggers (one per seed) are partial-label CRFs with unmatched tokens O,
// scored beside the labels of each split and registered.
func TestAutoNERGraph(t *testing.T) {
	g, err := expand(t, fixture(t), autonerSpec)
	if err != nil {
		t.Fatal(err)
	}
	tb, ok := g.Node("tiebreak-labels")
	if !ok || tb.Stage != distant.StageTieBreak {
		t.Fatalf("tiebreak-labels %+v in %v", tb, ids(g))
	}
	var gaz []string
	for _, in := range tb.Inputs {
		if in.Port == "gazetteers" {
			gaz = append(gaz, in.Node)
		}
	}
	if len(gaz) != 2 {
		t.Errorf("tiebreak-labels reads gazetteers %v, want both inputs", gaz)
	}
	for _, id := range []string{"label", "tiebreak-labels", "labels-dev", "labels-test"} {
		if p := nodeParams(t, g, id); p["case"] != "variants" {
			t.Errorf("%s matches with case %v, want the method's variants", id, p["case"])
		}
	}
	for _, seed := range []string{"1", "2"} {
		p := nodeParams(t, g, "fuzzy[seed="+seed+"]")
		if p["head"] != tagger.CRFHead || p["loss"] != tagger.LossPartial || p["miss_rate"] != 0.0 || p["scheme"] != "bio" {
			t.Errorf("fuzzy[seed=%s] params %v", seed, p)
		}
		for ev, base := range map[string]string{"eval-fuzzy": "labels-dev", "test-fuzzy": "labels-test"} {
			n, ok := g.Node(ev + "[seed=" + seed + "]")
			if !ok {
				t.Fatalf("no %s[seed=%s] in %v", ev, seed, ids(g))
			}
			if i := slices.IndexFunc(n.Inputs, func(in spec.Input) bool { return in.Port == "baseline" }); i < 0 || n.Inputs[i].Node != base {
				t.Errorf("%s inputs %+v, want baseline %s", ev, n.Inputs, base)
			}
		}
		p = nodeParams(t, g, "tiebreak[seed="+seed+"]")
		// miss_rate 0 passed, not the stage's 0.5: AutoNER's None spans.
		if p["head"] != tagger.TieBreakHead || p["loss"] != tagger.LossTieBreak || p["miss_rate"] != 0.0 || p["scheme"] != "bio" {
			t.Errorf("tiebreak[seed=%s] params %v", seed, p)
		}
		if n, ok := g.Node("eval-tiebreak[seed=" + seed + "]"); !ok || !slices.ContainsFunc(n.Inputs, func(in spec.Input) bool { return in.Port == "baseline" && in.Node == "labels-dev" }) {
			t.Errorf("eval-tiebreak[seed=%s] %+v", seed, n)
		}
		reg, _ := g.Node("register-fuzzy[seed=" + seed + "]")
		if reg.Stage != registry.StageName || nodeParams(t, g, "register-fuzzy[seed="+seed+"]")["name"] != "a-fuzzy" {
			t.Errorf("register-fuzzy[seed=%s] %+v", seed, reg)
		}
	}
}

// On CoNLL-2003's distant tags there is no gazetteer: both variants train
// on the train input's tags as they are, nothing writes Tie-or-Break
// labels, and the dev scores have no gazetteer labels to stand beside.
func TestAutoNEROnDistantTags(t *testing.T) {
	g, err := expand(t, fixture(t), example(t, "conll03-autoner.yaml"), noOverlay)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"label", "tiebreak-labels", "labels-dev"} {
		if _, ok := g.Node(id); ok {
			t.Errorf("node %s in %v: no gazetteers to match", id, ids(g))
		}
	}
	for _, v := range []string{"fuzzy", "tiebreak"} {
		for _, seed := range []string{"1", "2", "3"} {
			id := v + "[seed=" + seed + "]"
			p := nodeParams(t, g, id)
			if p["corpus_file"] != "train_text.txt" || p["corpus_labels"] != "train_label_dist.txt" || p["dev_labels"] != "valid_label_true.txt" {
				t.Errorf("%s reads %v, want the distant tags and the gold dev tags", id, p)
			}
			n, _ := g.Node(id)
			if in := portIn(n, "corpus"); in.Node != "" {
				t.Errorf("%s reads its corpus from node %s, want the train input", id, in.Node)
			}
			ev, ok := g.Node("eval-" + id)
			if !ok || portIn(ev, "model").Node != id || portIn(ev, "baseline").Node != "" {
				t.Errorf("eval-%s %+v", id, ev)
			}
		}
	}
}

// Several miss rates, as by default 0 and 0.5, are candidates: each
// variant's tagger fans out over them beside the seeds, and node
// select-VARIANT keeps, per seed, the tagger the dev input scores best, in
// the rates' order; the ending (the overlay, the test, the registry)
// follows the kept one. One rate, as a list or a single number, is the
// tagger's own miss_rate, with nothing to select; without a dev input the
// default's first rate, AutoNER's 0, is.
func TestAutoNERChoosesTheMissRateOnDev(t *testing.T) {
	g, err := expand(t, fixture(t), strings.Replace(autonerSpec, "miss_rate: 0, ", "", 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"fuzzy", "tiebreak"} {
		for _, seed := range []string{"1", "2"} {
			var models, reports []string
			for _, rate := range []string{"0", "0.5"} {
				id := v + "[miss_rate=" + rate + ",seed=" + seed + "]"
				if p := nodeParams(t, g, id); fmt.Sprint(p["miss_rate"]) != rate || fmt.Sprint(p["seed"]) != seed {
					t.Errorf("%s params %v", id, p)
				}
				models, reports = append(models, id), append(reports, "eval-"+id)
			}
			sel, ok := g.Node("select-" + v + "[seed=" + seed + "]")
			if !ok {
				t.Fatalf("no select-%s[seed=%s] in %v", v, seed, ids(g))
			}
			var gotModels, gotReports []string
			for _, in := range sel.Inputs {
				switch in.Port {
				case "models":
					gotModels = append(gotModels, in.Node)
				case "reports":
					gotReports = append(gotReports, in.Node)
				}
			}
			if !slices.Equal(gotModels, models) || !slices.Equal(gotReports, reports) {
				t.Errorf("select-%s[seed=%s] models %v reports %v, want %v and %v", v, seed, gotModels, gotReports, models, reports)
			}
			if names := nodeParams(t, g, sel.ID)["names"]; fmt.Sprint(names) != "[miss_rate 0 miss_rate 0.5]" {
				t.Errorf("%s names %v", sel.ID, names)
			}
			ov, _ := g.Node("overlay-fill-" + v + "[seed=" + seed + "]")
			if ov == nil || portIn(ov, "model").Node != sel.ID {
				t.Errorf("overlay-fill-%s[seed=%s] %+v, want the model of %s", v, seed, ov, sel.ID)
			}
		}
	}
	// A rate listed twice trains once.
	g, err = expand(t, fixture(t), strings.Replace(autonerSpec, "miss_rate: 0,", "miss_rate: [0, 0.5, 0],", 1))
	if err != nil {
		t.Fatal(err)
	}
	if sel, ok := g.Node("select-fuzzy[seed=1]"); !ok || len(portNodes(sel, "models")) != 2 {
		t.Errorf("miss_rate [0, 0.5, 0]: select-fuzzy[seed=1] %+v, want the taggers at 0 and 0.5", sel)
	}
	for _, rates := range []string{"miss_rate: [0.5],", "miss_rate: 0.5,"} {
		g, err := expand(t, fixture(t), strings.Replace(autonerSpec, "miss_rate: 0,", rates, 1))
		if err != nil {
			t.Fatal(err)
		}
		if p := nodeParams(t, g, "tiebreak[seed=2]"); p["miss_rate"] != 0.5 {
			t.Errorf("%s: tiebreak[seed=2] miss_rate %v", rates, p["miss_rate"])
		}
		if _, ok := g.Node("select-tiebreak[seed=2]"); ok {
			t.Errorf("%s: a select node with one rate", rates)
		}
	}
}

func TestAutoNERErrors(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{"  gazetteers: [../../data/gaz/per.txt, ../../data/gaz/loc.txt]\n", "  stopwords: ../../data/gaz/per.txt\n", "inputs.stopwords: stopwords only matter with gazetteers"},
		{"seeds: [1, 2],", "seeds: [1, 2], variants: [],", "params.variants: want at least one of fuzzy, tiebreak"},
		{"seeds: [1, 2],", "seeds: [],", "params.seeds: want at least one seed"},
		{"miss_rate: 0,", "miss_rate: 2,", "miss_rate"},
		{"miss_rate: 0,", "miss_rate: [],", "params.miss_rate: want at least one rate"},
	} {
		_, err := expand(t, fixture(t), strings.Replace(autonerSpec, tc.from, tc.to, 1))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q -> %q: error %v, want %q", tc.from, tc.to, err, tc.want)
		}
	}
	noDev := strings.NewReplacer("dev_file: test.conll,", "", "miss_rate: 0,", "miss_rate: [0, 0.5],", "  dev: ../../data\n", "").Replace(autonerSpec)
	if _, err := expand(t, fixture(t), noDev); err == nil || !strings.Contains(err.Error(), "params.miss_rate: several rates ([0 0.5]) are candidates chosen on the dev input") {
		t.Errorf("several rates without a dev input: %v", err)
	}
	byDefault := strings.NewReplacer("dev_file: test.conll,", "", "miss_rate: 0,", "", "  dev: ../../data\n", "").Replace(autonerSpec)
	g, err := expand(t, fixture(t), byDefault)
	if err != nil {
		t.Fatalf("the default rates without a dev input: %v", err)
	}
	if p := nodeParams(t, g, "fuzzy[seed=1]"); p["miss_rate"] != 0.0 {
		t.Errorf("the default rates without a dev input: fuzzy[seed=1] miss_rate %v, want AutoNER's 0", p["miss_rate"])
	}
}

// With a dev input and both variants, the run ends with one tagger per
// seed: node select keeps the variant's final model (its overlay choice)
// that the dev input scores best, Tie-or-Break on a tie, and that one is
// tested and registered under the spec's name, beside each variant's own.
// One variant, or no dev input, ends with the variant's model alone.
func TestAutoNERKeepsTheBestVariantOnDev(t *testing.T) {
	g, err := expand(t, fixture(t), autonerSpec)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range []string{"1", "2"} {
		at := "[seed=" + seed + "]"
		sel, ok := g.Node("select" + at)
		if !ok {
			t.Fatalf("no select%s in %v", at, ids(g))
		}
		if got, want := portNodes(sel, "models"), []string{"overlay-fuzzy" + at, "overlay-tiebreak" + at}; !slices.Equal(got, want) {
			t.Errorf("select%s chooses among %v, want %v", at, got, want)
		}
		if got, want := portNodes(sel, "reports"), []string{"eval-overlay-fuzzy" + at, "eval-overlay-tiebreak" + at}; !slices.Equal(got, want) {
			t.Errorf("select%s weighs %v, want %v", at, got, want)
		}
		if names := nodeParams(t, g, sel.ID)["names"]; fmt.Sprint(names) != "[fuzzy tiebreak]" {
			t.Errorf("select%s names %v", at, names)
		}
		for _, id := range []string{"eval-select" + at, "test" + at, "register" + at} {
			n, ok := g.Node(id)
			if !ok || portIn(n, "model").Node != sel.ID {
				t.Errorf("%s %+v, want it to read the model of %s", id, n, sel.ID)
			}
		}
		if test, _ := g.Node("test" + at); portIn(test, "baseline").Node != "labels-test" {
			t.Errorf("test%s scores without the labels of the test split beside it", at)
		}
		if name := nodeParams(t, g, "register"+at)["name"]; name != "a" {
			t.Errorf("register%s registers as %v, want the spec's name", at, name)
		}
		for _, v := range []string{"fuzzy", "tiebreak"} {
			if _, ok := g.Node("register-" + v + at); !ok {
				t.Errorf("no register-%s%s: each variant stays registered", v, at)
			}
		}
	}
	for what, text := range map[string]string{
		"one variant":  strings.Replace(autonerSpec, "seeds: [1, 2],", "seeds: [1, 2], variants: [tiebreak],", 1),
		"no dev input": strings.NewReplacer("dev_file: test.conll,", "", "  dev: ../../data\n", "").Replace(autonerSpec),
	} {
		g, err := expand(t, fixture(t), text)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, id := range []string{"select[seed=1]", "register[seed=1]"} {
			if _, ok := g.Node(id); ok {
				t.Errorf("%s: node %s, want the variants' models alone", what, id)
			}
		}
	}
}
