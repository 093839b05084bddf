package methods_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/selftrain"
	"github.com/nerflow/nerflow/train/tagger"
)

// The example with partial=false makes BOND's own graph: stage 1 cross entropy
// on the distant labels, at least 1,000 steps, scored at the automatic
// interval and stopped early, stage 2 teacher-student self-training from
// its model with the automatic period, both scored on the dev set.
// bondRecipe turns the example's partial-label CRFs into BOND's token
// classifiers, clearing the labels' per-type noise that only those CRFs
// read.
var bondRecipe = []string{"partial=false", "type_miss_rates=", "mistype_rates="}

func TestBondGraph(t *testing.T) {
	g, err := expand(t, fixture(t), example(t, "conll03-bond.yaml"), append([]string{noOverlay}, bondRecipe...)...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"vectors", "early", "eval-early", "selftrain", "eval-selftrain", "select", "eval-select", "register"}
	if got := ids(g); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("nodes %v, want %v", got, want)
	}
	early, _ := g.Node("early")
	if p := nodeParams(t, g, "early"); early.Stage != tagger.StageTrain || early.Queue != "gpu" || p["head"] != tagger.TokenHead ||
		p["loss"] != tagger.LossCE || p["eval_every"] != float64(tagger.EvalAuto) || p["min_steps"] != 1000.0 || p["patience"] != 4.0 || p["epochs"] != 8.0 || p["drop_o"] != 0.0 ||
		p["update_interval"] != 0.0 || p["corpus_labels"] != "train_label_dist.txt" || p["dev_labels"] != "valid_label_true.txt" {
		t.Errorf("early: %s on %q, params %v", early.Stage, early.Queue, p)
	}
	st, _ := g.Node("selftrain")
	if p := nodeParams(t, g, "selftrain"); st.Stage != selftrain.StageTeacher || p["labels"] != selftrain.LabelsSoft || p["threshold"] != 0.9 ||
		p["period"] != float64(selftrain.PeriodAuto) || p["epochs"] != 4.0 || p["eval_every"] != float64(tagger.EvalAuto) || p["patience"] != 3.0 || p["seed"] != 1.0 {
		t.Errorf("selftrain: %s, params %v", st.Stage, p)
	}
	if portIn(st, "model").Node != "early" || portIn(st, "dev").Node != "" {
		// The dev input is a dataset, not a node.
		t.Errorf("selftrain reads %+v, want early's model", st.Inputs)
	}
	for node, model := range map[string]string{"eval-early": "early", "eval-selftrain": "selftrain", "eval-select": "select", "register": "select"} {
		n, _ := g.Node(node)
		if portIn(n, "model").Node != model {
			t.Errorf("%s reads %+v, want %s's model", node, n.Inputs, model)
		}
	}
	reg, _ := g.Node("register")
	if portIn(reg, "reports").Node != "eval-select" {
		t.Errorf("register reads %+v, want the final model's dev report", reg.Inputs)
	}
}

// The ablations are parameters: labels=hard changes stage 2 only, so stage
// 1 keeps its key (and cache); selftrain=false registers stage 1's model.
func TestBondAblations(t *testing.T) {
	dir := fixture(t)
	oneRate := "miss_rate=0.5"
	full, err := expand(t, dir, example(t, "conll03-bond.yaml"), noOverlay, oneRate)
	if err != nil {
		t.Fatal(err)
	}
	hard, err := expand(t, dir, example(t, "conll03-bond.yaml"), noOverlay, oneRate, "labels=hard", "threshold=0.95")
	if err != nil {
		t.Fatal(err)
	}
	a, b := shapes(full), shapes(hard)
	for _, id := range []string{"vectors", "early", "eval-early"} {
		if a[id].Params != b[id].Params || a[id].Stage != b[id].Stage {
			t.Errorf("labels=hard changes node %s", id)
		}
	}
	if p := nodeParams(t, hard, "selftrain"); p["labels"] != selftrain.LabelsHard || p["threshold"] != 0.95 {
		t.Errorf("selftrain params %v, want hard labels at 0.95", p)
	}
	alone, err := expand(t, dir, example(t, "conll03-bond.yaml"), noOverlay, oneRate, "selftrain=false")
	if err != nil {
		t.Fatal(err)
	}
	// The final model is the better stage on dev; select=false keeps
	// stage 2's whatever the dev split says.
	sel, _ := full.Node("select")
	models := portNodes(sel, "models")
	if !slices.Equal(models, []string{"early", "selftrain"}) {
		t.Errorf("select reads the models of %v, want early's and selftrain's", models)
	}
	last, err := expand(t, dir, example(t, "conll03-bond.yaml"), noOverlay, oneRate, "select=false")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := last.Node("select"); ok || modelOf(t, last, "register") != "selftrain" {
		t.Errorf("select=false: register reads the model of %s, want selftrain's, and no node select", modelOf(t, last, "register"))
	}

	if got := ids(alone); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"early", "eval-early", "register", "vectors"}) {
		t.Errorf("selftrain=false: nodes %v", got)
	}
	reg, _ := alone.Node("register")
	if portIn(reg, "model").Node != "early" || portIn(reg, "reports").Node != "eval-early" {
		t.Errorf("selftrain=false: register reads %+v, want early's model and report", reg.Inputs)
	}
	if c := shapes(alone); c["early"].Params != a["early"].Params {
		t.Error("selftrain=false changes stage 1")
	}
}

// Without a dev set nothing selects the step: stage 1 runs its epochs, and
// the test set scores the final model.
func TestBondWithoutDev(t *testing.T) {
	text := `method: bond
params:
  train_file: train_text.txt
  train_labels: train_label_dist.txt
inputs:
  train: ../../shared/data/conll03
  test: ../../data/test.conll
`
	g, err := expand(t, fixture(t), text)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(g); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"early", "register", "selftrain", "test"}) {
		t.Errorf("nodes %v", got)
	}
	tst, _ := g.Node("test")
	if portIn(tst, "model").Node != "selftrain" {
		t.Errorf("test reads %+v", tst.Inputs)
	}
}

// partial=true (the default) makes stage 1 a partial-label CRF with the method's
// miss_rate; stage 2 is the same teacher-student node, reading a CRF model
// (selftrain.teacher picks the CRF's pseudo-labels and loss from it),
// given miss_rate = miss_rate so that the teacher's O is as weak as the
// distant O (0, the hard O, without partial; 0.5, miss_rate's default, by
// default). Everything else, stage 2's other parameters included, is as
// without it.
func TestBondPartialGraph(t *testing.T) {
	dir := fixture(t)
	plain, err := expand(t, dir, example(t, "conll03-bond.yaml"), append([]string{noOverlay}, bondRecipe...)...)
	if err != nil {
		t.Fatal(err)
	}
	g, err := expand(t, dir, example(t, "conll03-bond.yaml"), noOverlay, "miss_rate=0.4") // partial by default
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(g), ids(plain); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("nodes %v, want those without partial, %v", got, want)
	}
	if p := nodeParams(t, g, "early"); p["head"] != tagger.CRFHead || p["loss"] != tagger.LossPartial || p["miss_rate"] != 0.4 ||
		p["eval_every"] != float64(tagger.EvalAuto) || p["patience"] != 4.0 || p["drop_o"] != 0.0 {
		t.Errorf("early: params %v, want a partial-label CRF with miss_rate 0.4", p)
	}
	// Stage 2 is the same stage with the same parameters but one: the
	// teacher's confident O is as weak as stage 1's distant O.
	pp, gp := nodeParams(t, plain, "selftrain"), nodeParams(t, g, "selftrain")
	if pp["miss_rate"] != 0.0 || gp["miss_rate"] != 0.4 {
		t.Errorf("selftrain's miss_rate: %v without partial, %v with miss_rate 0.4; want 0 and 0.4", pp["miss_rate"], gp["miss_rate"])
	}
	delete(pp, "miss_rate")
	delete(gp, "miss_rate")
	if !reflect.DeepEqual(pp, gp) {
		t.Errorf("partial changes stage 2's params beyond miss_rate:\n%v\n%v", pp, gp)
	}
	st, _ := g.Node("selftrain")
	if portIn(st, "model").Node != "early" {
		t.Errorf("selftrain reads %+v, want early's model", st.Inputs)
	}
	if p := nodeParams(t, plain, "early"); p["head"] != tagger.TokenHead || p["loss"] != tagger.LossCE {
		t.Errorf("without partial, early: %v", p)
	}
}

// drop_o belongs to cross entropy and miss_rate to the partial-label CRF:
// each given with the other recipe is an error, not a silent no-op.
func TestBondPartialParamsBelongToTheirRecipe(t *testing.T) {
	dir := fixture(t)
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"partial=true", "drop_o=0.3"}, "params.drop_o"},
		{[]string{"partial=false", "miss_rate=0.3"}, "params.miss_rate"},
	} {
		if _, err := expand(t, dir, example(t, "conll03-bond.yaml"), tc.sets...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one at %s", tc.sets, err, tc.want)
		}
	}
}

// miss_rate lists candidates (by default 0.5, the labels' O doubted, and
// 0, AutoNER's sure O): each trains both stages, stage 2's teacher
// weighing its O at its own stage 1's rate, and select keeps the best of
// the four models on dev. A single rate is one chain, as before; several
// rates need the dev input to choose on and select to keep one.
func TestBondMissRateCandidates(t *testing.T) {
	dir := fixture(t)
	g, err := expand(t, dir, example(t, "conll03-bond.yaml"), noOverlay)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"vectors", "early[miss_rate=0.5]", "early[miss_rate=0]", "eval-early[miss_rate=0.5]", "eval-early[miss_rate=0]",
		"selftrain[miss_rate=0.5]", "selftrain[miss_rate=0]", "eval-selftrain[miss_rate=0.5]", "eval-selftrain[miss_rate=0]",
		"select", "eval-select", "register"}
	if got := ids(g); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("nodes %v, want %v", got, want)
	}
	for _, r := range []string{"0.5", "0"} {
		early, st := "early[miss_rate="+r+"]", "selftrain[miss_rate="+r+"]"
		rate := map[string]float64{"0.5": 0.5, "0": 0}[r]
		if p := nodeParams(t, g, early); p["miss_rate"] != rate || p["loss"] != tagger.LossPartial {
			t.Errorf("%s: params %v", early, p)
		}
		if p := nodeParams(t, g, st); p["miss_rate"] != rate {
			t.Errorf("%s: miss_rate %v, want its teacher's %v", st, p["miss_rate"], rate)
		}
		if m := modelOf(t, g, st); m != early {
			t.Errorf("%s learns from %s, want %s", st, m, early)
		}
		if m := modelOf(t, g, "eval-"+st); m != st {
			t.Errorf("eval-%s scores %s", st, m)
		}
	}
	sel, _ := g.Node("select")
	if got := portNodes(sel, "models"); !slices.Equal(got, []string{"early[miss_rate=0.5]", "early[miss_rate=0]", "selftrain[miss_rate=0.5]", "selftrain[miss_rate=0]"}) {
		t.Errorf("select weighs the models of %v", got)
	}
	if names := nodeParams(t, g, "select")["names"]; !reflect.DeepEqual(names, []any{"early-stopped miss_rate 0.5", "early-stopped miss_rate 0", "self-trained miss_rate 0.5", "self-trained miss_rate 0"}) {
		t.Errorf("select names its candidates %v", names)
	}

	// One rate listed: the single chain, at that rate.
	one, err := expand(t, dir, example(t, "conll03-bond.yaml"), noOverlay, "miss_rate=0")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := one.Node("early"); !ok || nodeParams(t, one, "early")["miss_rate"] != 0.0 || nodeParams(t, one, "selftrain")["miss_rate"] != 0.0 {
		t.Errorf("miss_rate=0: nodes %v", ids(one))
	}
	// Without stage 2, select chooses among stage 1's rates.
	alone, err := expand(t, dir, example(t, "conll03-bond.yaml"), noOverlay, "selftrain=false")
	if err != nil {
		t.Fatal(err)
	}
	alonesel, _ := alone.Node("select")
	if got := portNodes(alonesel, "models"); !slices.Equal(got, []string{"early[miss_rate=0.5]", "early[miss_rate=0]"}) {
		t.Errorf("selftrain=false: select weighs %v", got)
	}
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"select=false"}, "params.select"},
		{[]string{"miss_rate="}, "want at least one rate"},
	} {
		if _, err := expand(t, dir, example(t, "conll03-bond.yaml"), append([]string{noOverlay}, tc.sets...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one with %q", tc.sets, err, tc.want)
		}
	}
	// Without dev the default falls back to its first rate; a list given
	// explicitly has nothing to be chosen on.
	text := "method: bond\nparams:\n  train_file: train_text.txt\n  train_labels: train_label_dist.txt\n%sinputs:\n  train: ../../shared/data/conll03\n"
	g, err = expand(t, dir, fmt.Sprintf(text, ""))
	if err != nil {
		t.Fatal(err)
	}
	if p := nodeParams(t, g, "early"); p["miss_rate"] != 0.5 {
		t.Errorf("without dev: early's miss_rate %v, want the default's first, 0.5", p["miss_rate"])
	}
	if _, err := expand(t, dir, fmt.Sprintf(text, "  miss_rate: [0.5, 0]\n")); err == nil || !strings.Contains(err.Error(), "dev input") {
		t.Errorf("a list without dev: error %v", err)
	}
}
