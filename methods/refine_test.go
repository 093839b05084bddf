package methods_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/refine"
	"github.com/nerflow/nerflow/train/tagger"
)

// refine=auto on CoNLL-2003's distant tags: five folds of the labels as
// given, a partial-label CRF per fold (the seeds' recipe, first seed)
// predicting its held sentences, the vote, a tagger on each of the labels
// as given and the refined ones, the choice on dev; the seeds train on
// the labels chosen.
func TestRefineAuto(t *testing.T) {
	g, err := expand(t, fixture(t), example(t, "conll03-roster.yaml"), noOverlay, "refine=auto", "seeds=4,5")
	if err != nil {
		t.Fatal(err)
	}
	for k := range 5 {
		f := nodeParams(t, g, "refine-folds[fold="+strconv.Itoa(k)+"]")
		if f["corpus_file"] != "train_text.txt" || f["corpus_labels"] != "train_label_dist.txt" || f["folds"] != 5.0 || f["seed"] != 4.0 || f["scheme"] != "bio" {
			t.Errorf("refine-folds[fold=%d] params %v", k, f)
		}
		id := "[fold=" + strconv.Itoa(k) + "]"
		p := nodeParams(t, g, "refine-fold"+id)
		if p["head"] != tagger.CRFHead || p["loss"] != tagger.LossPartial || p["seed"] != 4.0 || p["miss_rate"] != 0.5 || p["epochs"] != 4.0 || p["min_steps"] != 1000.0 || fmt.Sprint(p["type_miss_rates"]) != "[MISC=0.8]" || p["dev_labels"] != "valid_label_true.txt" {
			t.Errorf("refine-fold%s params %v", id, p)
		}
		if in := readsOf(t, g, "refine-fold"+id, "corpus"); in != "refine-folds"+id+".train" {
			t.Errorf("refine-fold%s trains on %s", id, in)
		}
		pred, _ := g.Node("refine-predict" + id)
		if m, c := portIn(pred, "model"), portIn(pred, "corpus"); m.Node != "refine-fold"+id || c.Node != "refine-folds"+id || c.Output != "held" {
			t.Errorf("refine-predict%s reads %+v", id, pred.Inputs)
		}
	}
	vote, _ := g.Node("refine-vote")
	if got := portNodes(vote, "predictions"); len(got) != 5 || vote.Stage != refine.StageVote {
		t.Errorf("refine-vote %s reads predictions of %v", vote.Stage, got)
	}
	choose, _ := g.Node("refine")
	if portIn(choose, "given_report").Node != "eval-refine-given" || portIn(choose, "refined_report").Node != "eval-refine-refined" || portIn(choose, "refined").Node != "refine-vote" {
		t.Errorf("refine reads %+v", choose.Inputs)
	}
	if in := readsOf(t, g, "refine-refined", "corpus"); in != "refine-vote.refined" {
		t.Errorf("refine-refined trains on %s", in)
	}
	for _, id := range []string{"noise[seed=4]", "noise[seed=5]", "predict[seed=4]", "ensemble-labels"} {
		p := nodeParams(t, g, id)
		if in := readsOf(t, g, id, "corpus"); in != "refine.corpus" || p["corpus_file"] != "" {
			t.Errorf("%s reads %s (corpus_file %v), want the labels chosen", id, in, p["corpus_file"])
		}
	}

	// on: the refined labels, no choice.
	g, err = expand(t, fixture(t), example(t, "conll03-roster.yaml"), noOverlay, "refine=on", "refine_folds=3")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Node("refine"); ok || !slices.Contains(ids(g), "refine-fold[fold=2]") || slices.Contains(ids(g), "refine-fold[fold=3]") {
		t.Errorf("refine=on, 3 folds: nodes %v", ids(g))
	}
	if in := readsOf(t, g, "noise[seed=1]", "corpus"); in != "refine-vote.refined" {
		t.Errorf("refine=on: the seeds train on %s", in)
	}
}

// Methods of one seed and of a list of rates: the refinement's taggers
// take the seed, and the tagger's own miss rate.
func TestRefineSeedAndRate(t *testing.T) {
	g, err := expand(t, fixture(t), autonerSpec, "refine=on", "seeds=7")
	if err != nil {
		t.Fatal(err)
	}
	if p := nodeParams(t, g, "refine-fold[fold=0]"); p["seed"] != 7.0 || p["miss_rate"] != 0.0 || p["scheme"] != "bio" {
		t.Errorf("autoner: refine-fold params %v, want seed 7 and the tagger's own miss rate", p)
	}
	text := strings.Replace(example(t, "conll03-roster.yaml"), "method: roster", "method: bond", 1)
	text = strings.NewReplacer("  seeds: [1, 2, 3]\n", "", "  distil_epochs: 3\n", "", "  teacher_student: true\n", "").Replace(text)
	g, err = expand(t, fixture(t), text, "refine=on", "seed=3", "miss_rate=0.3")
	if err != nil {
		t.Fatal(err)
	}
	if p := nodeParams(t, g, "refine-fold[fold=0]"); p["seed"] != 3.0 || p["miss_rate"] != 0.3 {
		t.Errorf("bond: refine-fold params %v, want seed 3, miss rate 0.3", p)
	}
}

func TestRefineErrors(t *testing.T) {
	noDev := strings.NewReplacer("  dev: ../../shared/data/conll03\n", "", "  dev_file: valid_text.txt\n", "", "  dev_labels: valid_label_true.txt\n", "").
		Replace(example(t, "conll03-roster.yaml"))
	for _, tc := range []struct {
		text string
		sets []string
		want string
	}{
		{noDev, []string{"refine=auto", "teacher_student=false"}, "params.refine: auto keeps the labels whose tagger scores better on the dev input"},
		{example(t, "conll03-roster.yaml"), []string{"refine_folds=3"}, "params.refine_folds: applies to refine=on or auto"},
		{example(t, "conll03-roster.yaml"), []string{"refine=yes"}, "refine"},
	} {
		_, err := expand(t, fixture(t), tc.text, tc.sets...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.sets, err, tc.want)
		}
	}
	// Without dev and without asking, nothing is refined; on needs no dev.
	for _, set := range []string{"teacher_student=false", "refine=on"} {
		g, err := expand(t, fixture(t), noDev, "teacher_student=false", set)
		if err != nil {
			t.Fatal(err)
		}
		if has := slices.Contains(ids(g), "refine-vote"); has != (set == "refine=on") {
			t.Errorf("without dev, %s: nodes %v", set, ids(g))
		}
	}
}

// readsOf is what port of node id reads (inputOf).
func readsOf(t *testing.T, g *spec.Graph, id, port string) string {
	t.Helper()
	n, ok := g.Node(id)
	if !ok {
		t.Fatalf("no node %s in %v", id, ids(g))
	}
	return inputOf(n, port)
}

// The methods whose defaults cross-check their labels (refine=auto, chosen
// on the dev split, measured in docs/accuracy.md) build the choice at
// their defaults when a dev input is connected; distant, a comparison of
// losses, builds none. Changing a default is a decision these lines
// record, not a side effect.
func TestRefineDefaults(t *testing.T) {
	dir := conventionFixture(t)
	want := map[string]bool{"roster": true, "bond": true, "negsample": true, "autoner": true, "distant": false}
	for name, refined := range want {
		m, ok := spec.LookupMethod(name)
		if !ok {
			t.Fatalf("method %s is not registered", name)
		}
		_, g, err := buildWithDefaults(dir, m, true)
		if err != nil {
			t.Fatalf("%s with its defaults and a gazetteer: %v", name, err)
		}
		if _, has := g.Node("refine"); has != refined {
			t.Errorf("%s at its defaults: node refine built %v, want %v", name, has, refined)
		}
	}
}

// The check tagger on the labels kept is, for the engine, the method's
// tagger of the same recipe and first seed wherever the method has one:
// the same stage, parameters and labels (refine passes the vote's output
// on unchanged), so one node key, trained once. The seeds' tagger of
// roster and autoner's fuzzy tagger at miss_rate 0.5 are such taggers.
func TestRefineCheckIsTheMethodsTagger(t *testing.T) {
	for _, tc := range []struct {
		text   string
		sets   []string
		tagger string
	}{
		{example(t, "conll03-roster.yaml"), []string{noOverlay, "refine=auto", "seeds=4,5"}, "noise[seed=4]"}, // the example pins miss_rate 0.5
		{autonerSpec, []string{"refine=auto", "miss_rate=0,0.5", "seeds=3"}, "fuzzy[miss_rate=0.5]"},
	} {
		g, err := expand(t, fixture(t), tc.text, tc.sets...)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := g.Node(tc.tagger)
		if !ok {
			t.Fatalf("%v: no node %s in %v", tc.sets, tc.tagger, ids(g))
		}
		for _, set := range []string{refine.LabelsGiven, refine.LabelsRefined} {
			check, _ := g.Node("refine-" + set)
			if in := inputOf(check, "corpus"); in != "refine-vote."+set {
				t.Errorf("refine-%s trains on %s, want the vote's %s output", set, in, set)
			}
			if check.Stage != m.Stage || check.Version != m.Version || string(check.Params) != string(m.Params) {
				t.Errorf("refine-%s is %s v%d %s;\n%s is %s v%d %s", set, check.Stage, check.Version, check.Params, tc.tagger, m.Stage, m.Version, m.Params)
			}
		}
		if in := inputOf(m, "corpus"); in != "refine.corpus" {
			t.Errorf("%s trains on %s, want the labels kept", tc.tagger, in)
		}
	}
}
