package methods_test

import (
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
params: {seeds: [1, 2], case: variants, dev_file: test.conll, test_file: test.conll}
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

func TestAutoNERErrors(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{"  gazetteers: [../../data/gaz/per.txt, ../../data/gaz/loc.txt]\n", "  stopwords: ../../data/gaz/per.txt\n", "inputs.stopwords: stopwords only matter with gazetteers"},
		{"seeds: [1, 2],", "seeds: [1, 2], variants: [],", "params.variants: want at least one of fuzzy, tiebreak"},
		{"seeds: [1, 2],", "seeds: [],", "params.seeds: want at least one seed"},
		{"seeds: [1, 2],", "seeds: [1], miss_rate: 2,", "miss_rate"},
	} {
		_, err := expand(t, fixture(t), strings.Replace(autonerSpec, tc.from, tc.to, 1))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q -> %q: error %v, want %q", tc.from, tc.to, err, tc.want)
		}
	}
}
