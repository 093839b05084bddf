package methods_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/ensemble"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/selftrain"
	"github.com/nerflow/nerflow/train/tagger"
)

// The paper's recipe (partial=false) makes RoSTER's whole graph: five
// seeds on the gpu queue, their predictions averaged, distilled for 2
// epochs with KL, self-trained, each step scored.
func TestRosterGraph(t *testing.T) {
	dir := fixture(t)
	g, err := expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"vectors", "average", "distil", "eval-distil", "lm", "selftrain", "eval-selftrain", "register"}
	for s := 1; s <= 5; s++ {
		for _, n := range []string{"noise", "eval-noise", "predict"} {
			want = append(want, n+"[seed="+string(rune('0'+s))+"]")
		}
	}
	if got := ids(g); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("nodes %v\nwant  %v", got, want)
	}
	noise, _ := g.Node("noise[seed=3]")
	if p := nodeParams(t, g, noise.ID); noise.Queue != "gpu" || p["loss"] != tagger.LossGCE || p["q"] != 0.7 || p["tau"] != 0.7 ||
		p["update_interval"] != 200.0 || p["drop_o"] != 0.5 || p["seed"] != 3.0 || p["epochs"] != 3.0 {
		t.Errorf("noise[seed=3] on %s: %v", noise.Queue, p)
	}
	avg, _ := g.Node("average")
	if avg.Stage != ensemble.StageAverage || len(avg.Inputs) != 5 || avg.Inputs[4].Node != "predict[seed=5]" {
		t.Errorf("average: %+v", avg)
	}
	if p := nodeParams(t, g, "distil"); p["loss"] != tagger.LossKL || p["epochs"] != 2.0 || p["corpus_file"] != "train_text.txt" {
		t.Errorf("distil params %v", p)
	}
	st, _ := g.Node("selftrain")
	if p := nodeParams(t, g, "selftrain"); st.Stage != selftrain.StageTagger || p["epochs"] != 5.0 || p["update_interval"] != 100.0 || p["entity_threshold"] != 0.8 {
		t.Errorf("selftrain %s params %v", st.Stage, p)
	}
	if i := slices.IndexFunc(st.Inputs, func(in spec.Input) bool { return in.Port == "model" }); i < 0 || st.Inputs[i].Node != "distil" {
		t.Errorf("selftrain reads %+v, want distil's model", st.Inputs)
	}
	if i := slices.IndexFunc(st.Inputs, func(in spec.Input) bool { return in.Port == "lm" }); i < 0 || st.Inputs[i].Node != "lm" {
		t.Errorf("selftrain reads %+v, want lm's language models", st.Inputs)
	}
	lm, _ := g.Node("lm")
	if p := nodeParams(t, g, "lm"); lm.Stage != augment.StageLM || lm.Queue != "gpu" || p["corpus_file"] != "train_text.txt" {
		t.Errorf("lm: stage %s on %q, params %v", lm.Stage, lm.Queue, p)
	}
	reg, _ := g.Node("register")
	if !slices.Equal(reg.Parents, []string{"eval-selftrain", "selftrain"}) && !slices.Equal(reg.Parents, []string{"selftrain", "eval-selftrain"}) {
		t.Errorf("register parents %v", reg.Parents)
	}
}

// The defaults: partial-label CRF seeds, a partial-label CRF student on the
// ensemble's labels, no self-training (so no language models); asking for
// self-training after that student is an error, and a kl student brings it
// back.
func TestRosterDefaultRecipe(t *testing.T) {
	dir := fixture(t)
	// The example adds teacher_student, which the method leaves off; one
	// miss rate (TestRosterChoosesTheMissRatePerSeed has the candidates).
	g, err := expand(t, dir, example(t, "conll03-roster.yaml"), noOverlay, "teacher_student=false", "miss_rate=0.5")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"vectors", "average", "ensemble-labels", "distil", "eval-distil", "select", "eval-select", "register"}
	for s := 1; s <= 3; s++ {
		for _, n := range []string{"noise", "eval-noise", "predict"} {
			want = append(want, n+"[seed="+string(rune('0'+s))+"]")
		}
	}
	if got := ids(g); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("nodes %v\nwant  %v", got, want)
	}
	if p := nodeParams(t, g, "noise[seed=2]"); p["head"] != tagger.CRFHead || p["loss"] != tagger.LossPartial || p["miss_rate"] != 0.5 || p["epochs"] != 4.0 || p["min_steps"] != 1000.0 {
		t.Errorf("noise[seed=2] params %v", p)
	}
	distil, _ := g.Node("distil")
	if p := nodeParams(t, g, "distil"); p["head"] != tagger.CRFHead || p["loss"] != tagger.LossPartial || p["epochs"] != 3.0 || p["min_steps"] != 1000.0 ||
		!slices.ContainsFunc(distil.Inputs, func(in spec.Input) bool { return in.Node == "ensemble-labels" }) {
		t.Errorf("distil params %v, inputs %+v", p, distil.Inputs)
	}
	// The final model is the best of the seeds and the student on dev.
	sel, _ := g.Node("select")
	var models, reports []string
	for _, in := range sel.Inputs {
		switch in.Port {
		case "models":
			models = append(models, in.Node+"."+in.Output)
		case "reports":
			reports = append(reports, in.Node)
		}
	}
	if want := []string{"noise[seed=1].model", "noise[seed=2].model", "noise[seed=3].model", "distil.model"}; sel.Stage != eval.StageSelect || !slices.Equal(models, want) {
		t.Errorf("select %s reads models %v, want %v", sel.Stage, models, want)
	}
	if want := []string{"eval-noise[seed=1]", "eval-noise[seed=2]", "eval-noise[seed=3]", "eval-distil"}; !slices.Equal(reports, want) {
		t.Errorf("select reads reports %v, want %v", reports, want)
	}
	if p := nodeParams(t, g, "select"); fmt.Sprint(p["names"]) != "[seed 1 seed 2 seed 3 student]" {
		t.Errorf("select names %v", p["names"])
	}
	if got := modelOf(t, g, "register"); got != "select" {
		t.Errorf("register reads the model of %s, want select's", got)
	}
	last, err := expand(t, dir, example(t, "conll03-roster.yaml"), noOverlay, "select=false", "teacher_student=false", "miss_rate=0.5")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := last.Node("select"); ok || modelOf(t, last, "register") != "distil" {
		t.Errorf("select=false: register reads the model of %s, want distil's, and no node select", modelOf(t, last, "register"))
	}

	if _, err := expand(t, dir, example(t, "conll03-roster.yaml"), noOverlay, "selftrain=true"); err == nil || !strings.Contains(err.Error(), "params.student") {
		t.Errorf("selftrain=true after the crf student: err %v, want a params.student error", err)
	}
	kl, err := expand(t, dir, example(t, "conll03-roster.yaml"), noOverlay, "student=kl")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := kl.Node("selftrain"); !ok {
		t.Error("student=kl: no node selftrain")
	}
	if p := nodeParams(t, kl, "distil"); p["loss"] != tagger.LossKL {
		t.Errorf("student=kl: distil params %v", p)
	}
}

// Ablations are one parameter away and keep the prefix: the same nodes
// before the step switched off, hence the same keys and cache.
func TestRosterAblations(t *testing.T) {
	dir := fixture(t)
	full, err := expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay)
	if err != nil {
		t.Fatal(err)
	}
	noSelf, err := expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay, "selftrain=false")
	if err != nil {
		t.Fatal(err)
	}
	a, b := shapes(full), shapes(noSelf)
	for id, s := range b {
		if id == "register" {
			continue
		}
		if full, ok := a[id]; !ok || full.Params != s.Params || full.Stage != s.Stage {
			t.Errorf("node %s differs without self-training", id)
		}
	}
	if _, ok := b["selftrain"]; ok {
		t.Error("selftrain=false keeps node selftrain")
	}
	reg, _ := noSelf.Node("register")
	if !slices.Contains(reg.Parents, "distil") {
		t.Errorf("without self-training register reads %v, want distil's model", reg.Parents)
	}

	bare, err := expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay, "seeds=4", "ensemble=false", "selftrain=false", "gce=false", "removal=false")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"vectors", "noise", "eval-noise", "register"}; !slices.Equal(slices.Sorted(slices.Values(ids(bare))), slices.Sorted(slices.Values(want))) {
		t.Fatalf("nodes %v, want %v", ids(bare), want)
	}
	if p := nodeParams(t, bare, "noise"); p["loss"] != tagger.LossCE || p["update_interval"] != 0.0 || p["seed"] != 4.0 {
		t.Errorf("noise params %v: want cross entropy, no removal, seed 4", p)
	}
	if _, err := expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay, "ensemble=false"); err == nil {
		t.Error("ensemble=false with five seeds: no error")
	}
}

// augment=false self-trains on the originals only: no node lm, and every
// other node as with augmentation but self-training's input lm.
func TestRosterWithoutAugmentation(t *testing.T) {
	dir := fixture(t)
	full, err := expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay, "augment=false")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.Node("lm"); ok {
		t.Error("augment=false keeps node lm")
	}
	st, _ := plain.Node("selftrain")
	if slices.ContainsFunc(st.Inputs, func(in spec.Input) bool { return in.Port == "lm" }) {
		t.Errorf("augment=false: selftrain reads %+v", st.Inputs)
	}
	a, b := shapes(full), shapes(plain)
	if len(a) != len(b)+1 {
		t.Errorf("%d nodes with augmentation, %d without, want one more", len(a), len(b))
	}
	for id, s := range b {
		if f, ok := a[id]; !ok || f.Params != s.Params || f.Stage != s.Stage {
			t.Errorf("node %s differs without augmentation", id)
		}
	}
	if _, err := expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay, "augment=false", "selftrain=false"); err != nil {
		t.Errorf("augment=false with selftrain=false: %v", err)
	}
	noSelf, err := expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay, "selftrain=false")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := noSelf.Node("lm"); ok {
		t.Error("selftrain=false keeps node lm, which only self-training reads")
	}
}

// The unlabeled input reaches the language models only; without them it
// is an error.
func TestRosterUnlabeledText(t *testing.T) {
	dir := fixture(t)
	text := example(t, "conll03-roster-paper.yaml") + "  unlabeled: ../../data/raw.txt\n"
	g, err := expand(t, dir, text)
	if err != nil {
		t.Fatal(err)
	}
	lm, _ := g.Node("lm")
	if !slices.ContainsFunc(lm.Inputs, func(in spec.Input) bool { return in.Port == "unlabeled" }) {
		t.Errorf("lm reads %+v, want the unlabeled input", lm.Inputs)
	}
	if _, err := expand(t, dir, text, "augment=false"); err == nil || !strings.Contains(err.Error(), "unlabeled") {
		t.Errorf("unlabeled text with augment=false: error %v", err)
	}
}

// entity_target=ensemble, the default, gives self-training the averaged
// predictions; the other targets do not read them. Without the ensemble the
// default falls back to hard, and an explicit ensemble is an error.
func TestRosterEnsembleEntityTarget(t *testing.T) {
	dir := fixture(t)
	g, err := expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := g.Node("selftrain")
	if i := slices.IndexFunc(st.Inputs, func(in spec.Input) bool { return in.Port == "soft" }); i < 0 || st.Inputs[i].Node != "average" {
		t.Errorf("selftrain reads %+v, want average's predictions as soft", st.Inputs)
	}
	if p := nodeParams(t, g, "selftrain"); p["entity_target"] != selftrain.EntityEnsemble {
		t.Errorf("selftrain params %v", p)
	}
	for _, target := range []string{selftrain.EntityHard, selftrain.EntityModel} {
		g, err := expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay, "entity_target="+target)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := g.Node("selftrain")
		if slices.ContainsFunc(st.Inputs, func(in spec.Input) bool { return in.Port == "soft" }) {
			t.Errorf("entity_target=%s: selftrain reads %+v", target, st.Inputs)
		}
	}
	_, err = expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay, "entity_target=ensemble", "seeds=1", "ensemble=false")
	if err == nil || !strings.Contains(err.Error(), "entity_target") {
		t.Errorf("entity_target=ensemble without the ensemble: %v", err)
	}
	single, err := expand(t, dir, example(t, "conll03-roster-paper.yaml"), noOverlay, "seeds=1", "ensemble=false")
	if err != nil {
		t.Fatal(err)
	}
	st, _ = single.Node("selftrain")
	if p := nodeParams(t, single, "selftrain"); p["entity_target"] != selftrain.EntityHard || slices.ContainsFunc(st.Inputs, func(in spec.Input) bool { return in.Port == "soft" }) {
		t.Errorf("ensemble=false with the default target: selftrain params %v, inputs %+v; want hard, no soft", p, st.Inputs)
	}
}

// modelOf returns the node whose model node id reads (its input model).
func modelOf(t *testing.T, g *spec.Graph, id string) string {
	t.Helper()
	n, ok := g.Node(id)
	if !ok {
		t.Fatalf("no node %s", id)
	}
	for _, in := range n.Inputs {
		if in.Port == "model" {
			return in.Node
		}
	}
	return ""
}

// teacher_student adds BOND's rounds after the last step, on its model,
// with the O evidence that model was trained at; the earlier nodes keep
// their keys (and cache), and the new model is one more candidate.
func TestRosterTeacherStudent(t *testing.T) {
	dir := fixture(t)
	base, err := expand(t, dir, example(t, "conll03-roster.yaml"), noOverlay, "teacher_student=false")
	if err != nil {
		t.Fatal(err)
	}
	g, err := expand(t, dir, example(t, "conll03-roster.yaml"), noOverlay) // the example turns it on
	if err != nil {
		t.Fatal(err)
	}
	ts, ok := g.Node("teacher-student")
	if !ok || ts.Stage != selftrain.StageTeacher || ts.Queue != "gpu" || modelOf(t, g, "teacher-student") != "distil" {
		t.Fatalf("teacher-student %+v in %v", ts, ids(g))
	}
	if p := nodeParams(t, g, "teacher-student"); p["miss_rate"] != 0.2 || p["seed"] != 1.0 || p["patience"] != 0.0 || p["dev_labels"] != "valid_label_true.txt" {
		t.Errorf("teacher-student params %v, want the student's miss rate 0.2, seed 1, patience 0 and the dev tags", p)
	}
	if p := nodeParams(t, g, "select"); fmt.Sprint(p["names"]) != "[seed 1 seed 2 seed 3 student teacher-student]" {
		t.Errorf("select names %v", p["names"])
	}
	if _, ok := g.Node("eval-teacher-student"); !ok {
		t.Errorf("no eval-teacher-student in %v", ids(g))
	}
	for _, id := range []string{"noise[seed=1]", "distil", "eval-distil"} { // the example pins miss_rate 0.5
		a, aok := base.Node(id)
		b, bok := g.Node(id)
		if !aok || !bok {
			t.Fatalf("no node %s in %v", id, ids(g))
		}
		if string(a.Params) != string(b.Params) || !slices.Equal(a.Parents, b.Parents) {
			t.Errorf("%s changed with teacher_student: %s vs %s", id, a.Params, b.Params)
		}
	}
	kl, err := expand(t, dir, example(t, "conll03-roster.yaml"), noOverlay, "teacher_student=true", "student=kl")
	if err != nil {
		t.Fatal(err)
	}
	if modelOf(t, kl, "teacher-student") != "selftrain" {
		t.Errorf("after the kl student the rounds start from %s, want selftrain's model", modelOf(t, kl, "teacher-student"))
	}
	if p := nodeParams(t, kl, "teacher-student"); p["miss_rate"] != 0.0 {
		t.Errorf("a token-head teacher gets miss_rate %v, want the stage's default 0", p["miss_rate"])
	}
}

// Span seeds are span classifiers with negative sampling on the same
// labels and with their noise, members of the ensemble beside the CRF
// seeds and candidates of select; the CRF seeds and their nodes do not
// change (so their cache holds). They need the ensemble, and span_epochs
// needs them.
func TestRosterSpanSeeds(t *testing.T) {
	dir := fixture(t)
	base, err := expand(t, dir, example(t, "conll03-roster.yaml"), noOverlay, "span_seeds=")
	if err != nil {
		t.Fatal(err)
	}
	g, err := expand(t, dir, example(t, "conll03-roster.yaml"), noOverlay, "span_seeds=4,5", "span_epochs=6")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"4", "5"} {
		p := nodeParams(t, g, "span[seed="+s+"]")
		if p["head"] != tagger.SpanHead || p["loss"] != tagger.LossNegSample || p["sampling"] != tagger.SamplingUniform || p["epochs"] != 6.0 ||
			fmt.Sprint(p["seed"]) != s || p["min_steps"] != 1000.0 || p["scheme"] != "bio" || fmt.Sprint(p["type_miss_rates"]) != "[MISC=0.8]" || fmt.Sprint(p["mistype_rates"]) != "[PER=0.1]" {
			t.Errorf("span[seed=%s] params %v", s, p)
		}
		if got := modelOf(t, g, "predict-span[seed="+s+"]"); got != "span[seed="+s+"]" {
			t.Errorf("predict-span[seed=%s] reads the model of %s", s, got)
		}
		if _, ok := g.Node("eval-span[seed=" + s + "]"); !ok {
			t.Errorf("no eval-span[seed=%s] in %v", s, ids(g))
		}
	}
	avg, _ := g.Node("average")
	var members []string
	for _, in := range avg.Inputs {
		members = append(members, in.Node)
	}
	if want := []string{"predict[seed=1]", "predict[seed=2]", "predict[seed=3]", "predict-span[seed=4]", "predict-span[seed=5]"}; !slices.Equal(members, want) {
		t.Errorf("average reads %v, want %v", members, want)
	}
	if p := nodeParams(t, g, "select"); fmt.Sprint(p["names"]) != "[seed 1 seed 2 seed 3 span seed 4 span seed 5 student teacher-student]" {
		t.Errorf("select names %v", p["names"])
	}
	for _, id := range []string{"noise[seed=1]", "predict[seed=2]", "eval-noise[seed=3]"} { // the example pins miss_rate 0.5
		a, aok := base.Node(id)
		b, bok := g.Node(id)
		if !aok || !bok {
			t.Fatalf("no node %s in %v", id, ids(g))
		}
		if string(a.Params) != string(b.Params) || !slices.Equal(a.Parents, b.Parents) {
			t.Errorf("%s changed with span seeds: %s vs %s", id, a.Params, b.Params)
		}
	}
	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"span_seeds=4", "ensemble=false", "seeds=1"}, "params.span_seeds"},
		{[]string{"span_seeds=", "span_epochs=6"}, "params.span_epochs"},
	} {
		if _, err := expand(t, dir, example(t, "conll03-roster.yaml"), append([]string{noOverlay}, c.sets...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want a %s error", c.sets, err, c.want)
		}
	}
	// The span seeds take the labels' noise also beside the paper's seeds
	// (which take no miss_rate: the example's line is left out).
	paperSeeds := regexp.MustCompile(`(?m)^  miss_rate:.*\n`).ReplaceAllString(example(t, "conll03-roster.yaml"), "")
	if _, err := expand(t, dir, paperSeeds, noOverlay, "span_seeds=4", "partial=false", "teacher_student=false"); err != nil {
		t.Errorf("span seeds with partial=false and the example's rates: %v", err)
	}
}

// By default each seed trains at each candidate miss rate and the dev
// input keeps the better per seed (select-noise[seed=N]), which the
// ensemble, the final select and the labels of the student read; one rate
// listed trains one tagger per seed at it, as before.
func TestRosterChoosesTheMissRatePerSeed(t *testing.T) {
	dir := fixture(t)
	// The example pins the rate dev chose on CoNLL-2003; the default's two.
	g, err := expand(t, dir, example(t, "conll03-roster.yaml"), noOverlay, "teacher_student=false", "miss_rate=0.5,0")
	if err != nil {
		t.Fatal(err)
	}
	var seedModels []string
	for _, seed := range []string{"1", "2", "3"} {
		var models, reports []string
		for _, rate := range []string{"0.5", "0"} {
			id := "noise[miss_rate=" + rate + ",seed=" + seed + "]"
			if p := nodeParams(t, g, id); fmt.Sprint(p["miss_rate"]) != rate || fmt.Sprint(p["seed"]) != seed || p["loss"] != tagger.LossPartial {
				t.Errorf("%s params %v", id, p)
			}
			if m := modelOf(t, g, "eval-"+id); m != id {
				t.Errorf("eval-%s scores %s", id, m)
			}
			models, reports = append(models, id), append(reports, "eval-"+id)
		}
		sel := "select-noise[seed=" + seed + "]"
		n, ok := g.Node(sel)
		if !ok {
			t.Fatalf("no %s in %v", sel, ids(g))
		}
		if got := portNodes(n, "models"); n.Stage != eval.StageSelect || !slices.Equal(got, models) {
			t.Errorf("%s (%s) weighs %v, want %v", sel, n.Stage, got, models)
		}
		if got := portNodes(n, "reports"); !slices.Equal(got, reports) {
			t.Errorf("%s reads reports %v, want %v", sel, got, reports)
		}
		if names := nodeParams(t, g, sel)["names"]; fmt.Sprint(names) != "[miss_rate 0.5 miss_rate 0]" {
			t.Errorf("%s names %v", sel, names)
		}
		if m := modelOf(t, g, "predict[seed="+seed+"]"); m != sel {
			t.Errorf("predict[seed=%s] reads the model of %s, want %s", seed, m, sel)
		}
		if m := modelOf(t, g, "eval-"+sel); m != sel {
			t.Errorf("eval-%s scores %s", sel, m)
		}
		seedModels = append(seedModels, sel)
	}
	final, _ := g.Node("select")
	if got := portNodes(final, "models"); !slices.Equal(got, append(seedModels, "distil")) {
		t.Errorf("select weighs %v, want the chosen seeds and the student", got)
	}
	if p := nodeParams(t, g, "distil"); p["miss_rate"] != 0.2 {
		t.Errorf("distil's miss_rate %v, want student_miss_rate's 0.2", p["miss_rate"])
	}

	// One rate: one tagger per seed at it, no select-noise.
	one, err := expand(t, dir, example(t, "conll03-roster.yaml"), noOverlay, "miss_rate=0")
	if err != nil {
		t.Fatal(err)
	}
	if p := nodeParams(t, one, "noise[seed=2]"); p["miss_rate"] != 0.0 {
		t.Errorf("miss_rate=0: noise[seed=2] params %v", p)
	}
	if _, ok := one.Node("select-noise[seed=2]"); ok || modelOf(t, one, "predict[seed=2]") != "noise[seed=2]" {
		t.Errorf("miss_rate=0: nodes %v", ids(one))
	}
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"miss_rate="}, "want at least one rate"},
		{[]string{"partial=false", "miss_rate=0"}, "params.miss_rate"},
		{[]string{"ensemble=false", "seeds=1", "teacher_student=true", "miss_rate=0.5,0"}, "give one rate"},
	} {
		if _, err := expand(t, dir, example(t, "conll03-roster.yaml"), append([]string{noOverlay}, tc.sets...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one with %q", tc.sets, err, tc.want)
		}
	}
}
