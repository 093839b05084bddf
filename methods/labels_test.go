package methods_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/ensemble"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/train/tagger"
)

// rosterOnGazetteers is a roster call that labels raw text with a gazetteer
// and name lists, scored on a dev and a test split.
const rosterOnGazetteers = `
name: r
method: roster
params: {seeds: [1, 2], partial: true, student: kl, miss_rate: 0.4, entry_sentences: true, case: fold, dev_file: test.conll, test_file: test.conll}
inputs:
  train: ../../data/raw.txt
  gazetteers: [../../data/gaz/per.txt]
  names: [../../data/gaz/loc.txt]
  dev: ../../data
  test: ../../data
`

// Every split is labeled by the same rule: the input's gazetteers plus the
// person names that the name lists find in that split's own sentences,
// connected as mined
// (the train input's for the training labels), as `nerflow distant
// --names` labels a corpus; each evaluation sets the labels of its split
// beside the model's score, and the overlay finds the names of the
// sentences it tags. With partial=true the
// seeds are partial-label CRFs (here with the kl student and self-training,
// so that every kind of step is scored).
func TestLabelsOfEverySplitAreTheBaseline(t *testing.T) {
	g, err := expand(t, fixture(t), rosterOnGazetteers)
	if err != nil {
		t.Fatal(err)
	}
	inputs := func(id string) map[string][]string {
		n, ok := g.Node(id)
		if !ok {
			t.Fatalf("no node %s in %v", id, ids(g))
		}
		m := map[string][]string{}
		for _, in := range n.Inputs {
			m[in.Port] = append(m[in.Port], in.Node)
		}
		return m
	}
	if n, _ := g.Node("names"); n.Stage != distant.StageNames {
		t.Errorf("names: stage %q", n.Stage)
	}
	for label, names := range map[string]string{"label": "names", "labels-dev": "names-dev", "labels-test": "names-test"} {
		// The names as input mined: they label, but give no entry
		// sentences (the corpus holds them already).
		if got, mined := inputs(label)["gazetteers"], inputs(label)["mined"]; !slices.Equal(got, []string{""}) || !slices.Equal(mined, []string{names}) {
			t.Errorf("%s reads gazetteers %v and mined %v, want the input's and %s's", label, got, mined, names)
		}
		if got, want := inputs(names)["corpus"], inputs(label)["corpus"]; !slices.Equal(got, want) {
			t.Errorf("%s searches %v, %s labels %v", names, got, label, want)
		}
		// One matching rule for the labels and their baselines.
		if p := nodeParams(t, g, label); p["case"] != "fold" {
			t.Errorf("%s matches with case %v, want the method's fold", label, p["case"])
		}
	}
	if p := nodeParams(t, g, "label"); p["entry_sentences"] != true || p["entry_share"] != 0.5 {
		t.Errorf("label params %v", p)
	}
	for _, ev := range []string{"eval-noise[seed=1]", "eval-distil", "eval-selftrain"} {
		if got := inputs(ev)["baseline"]; !slices.Equal(got, []string{"labels-dev"}) {
			t.Errorf("%s baseline %v, want labels-dev", ev, got)
		}
	}
	if got := inputs("test")["baseline"]; !slices.Equal(got, []string{"labels-test"}) {
		t.Errorf("test baseline %v", got)
	}
	for _, mode := range []string{"overlay-fill", "overlay-override", "overlay-extend"} {
		if in := inputs(mode); len(in["names"]) != 1 || !slices.Equal(in["names_corpus"], inputs("label")["corpus"]) {
			t.Errorf("%s: names %v, names_corpus %v: want the name lists and the train input", mode, in["names"], in["names_corpus"])
		}
	}
	if p := nodeParams(t, g, "noise[seed=2]"); p["head"] != tagger.CRFHead || p["loss"] != tagger.LossPartial || p["miss_rate"] != 0.4 || p["update_interval"] != 0.0 {
		t.Errorf("partial seeds: %v", p)
	}
}

// abbreviations reaches every labeling node, so that the baselines are
// labeled by the rule the training labels were.
func TestAbbreviationsLabelEverySplit(t *testing.T) {
	for _, on := range []bool{false, true} {
		g, err := expand(t, fixture(t), rosterOnGazetteers, fmt.Sprintf("abbreviations=%v", on))
		if err != nil {
			t.Fatal(err)
		}
		for _, label := range []string{"label", "labels-dev", "labels-test"} {
			if v := nodeParams(t, g, label)["abbreviations"]; v != on {
				t.Errorf("abbreviations=%v: %s has abbreviations %v", on, label, v)
			}
		}
	}
}

// capitalized reaches the training labels only (the baselines are what the
// gazetteers say), with the name lists for their titles and common words;
// the taggers trained on those labels count the phrases as entities, and
// the steps that only read them (predict) take no such param.
func TestCapitalizedLabelsTrainingOnly(t *testing.T) {
	g, err := expand(t, fixture(t), rosterOnGazetteers, "capitalized=true", "refine=off")
	if err != nil {
		t.Fatal(err)
	}
	if p := nodeParams(t, g, "label"); p["capitalized"] != true {
		t.Errorf("label params %v", p)
	}
	label, _ := g.Node("label")
	if !slices.ContainsFunc(label.Inputs, func(in spec.Input) bool { return in.Port == "names" }) {
		t.Errorf("label inputs %+v: want the name lists", label.Inputs)
	}
	for _, n := range []string{"labels-dev", "labels-test"} {
		if v, ok := nodeParams(t, g, n)["capitalized"]; ok && v != false {
			t.Errorf("%s: capitalized %v", n, v)
		}
	}
	for _, n := range []string{"noise[seed=1]", "noise[seed=2]"} {
		if p := nodeParams(t, g, n); p["unknown_as_entity"] != true {
			t.Errorf("%s: unknown_as_entity %v", n, p["unknown_as_entity"])
		}
	}
	if _, ok := nodeParams(t, g, "predict[seed=1]")["unknown_as_entity"]; ok {
		t.Error("predict got unknown_as_entity")
	}
}

// With refine and capitalized both on, the refinement weighs the labels
// without the phrases, its vote makes a rejected string O, and the phrases
// are added after it to the labels given and refined: the check taggers and
// the method's taggers read those, counting the phrases as entities, while
// the fold taggers read the plain labels. With refine on, only the refined
// labels get phrases.
func TestCapitalizedAfterRefine(t *testing.T) {
	g, err := expand(t, fixture(t), rosterOnGazetteers, "capitalized=true", "refine=auto")
	if err != nil {
		t.Fatal(err)
	}
	if p := nodeParams(t, g, "label"); p["capitalized"] == true {
		t.Errorf("label adds the phrases before the refinement: %v", p)
	}
	if p := nodeParams(t, g, "refine-vote"); p["rejected"] != "o" {
		t.Errorf("refine-vote rejected %v, want o", p["rejected"])
	}
	if p := nodeParams(t, g, "refine-fold[fold=0]"); p["unknown_as_entity"] == true {
		t.Error("the fold taggers read the labels without phrases, yet count them as entities")
	}
	for _, labels := range []string{"given", "refined"} {
		caps := "capitalized-" + labels
		if n, ok := g.Node(caps); !ok || n.Stage != distant.StageCapitalized {
			t.Fatalf("no %s node %s in %v", distant.StageCapitalized, caps, ids(g))
		}
		if in := portInput(t, g, caps, "corpus"); in.Node != "refine-vote" || in.Output != labels {
			t.Errorf("%s reads %+v, want refine-vote.%s", caps, in, labels)
		}
		if in := portInput(t, g, caps, "names"); in.Dataset == "" {
			t.Errorf("%s does not read the name lists", caps)
		}
		check := "refine-" + labels
		if in := portInput(t, g, check, "corpus"); in.Node != caps {
			t.Errorf("%s reads %+v, want %s", check, in, caps)
		}
		if p := nodeParams(t, g, check); p["unknown_as_entity"] != true {
			t.Errorf("%s: unknown_as_entity %v", check, p["unknown_as_entity"])
		}
		if in := portInput(t, g, "refine", labels); in.Node != caps {
			t.Errorf("refine keeps %+v as the %s labels, want %s", in, labels, caps)
		}
	}
	for _, n := range []string{"noise[seed=1]", "noise[seed=2]"} {
		if in := portInput(t, g, n, "corpus"); in.Node != "refine" {
			t.Errorf("%s reads %+v, want the labels refine keeps", n, in)
		}
		if p := nodeParams(t, g, n); p["unknown_as_entity"] != true {
			t.Errorf("%s: unknown_as_entity %v", n, p["unknown_as_entity"])
		}
	}

	g, err = expand(t, fixture(t), rosterOnGazetteers, "capitalized=true", "refine=on")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Node("capitalized-given"); ok {
		t.Error("refine=on adds the phrases to the labels as given too")
	}
	if in := portInput(t, g, "noise[seed=1]", "corpus"); in.Node != "capitalized-refined" {
		t.Errorf("noise reads %+v, want capitalized-refined", in)
	}
}

// capitalized: auto, the default, adds the phrases where the name lists
// are connected and refine is not set on or auto, and then leaves refine
// (auto by default) off; refine set on, or no name lists, and it is off.
func TestCapitalizedAuto(t *testing.T) {
	noNames := strings.Replace(rosterOnGazetteers, "  names: [../../data/gaz/loc.txt]\n", "", 1)
	for _, c := range []struct {
		name, text string
		set        []string
		phrases    bool
	}{
		{"names", rosterOnGazetteers, nil, true},
		{"names, capitalized=true", rosterOnGazetteers, []string{"capitalized=true"}, true},
		{"names, refine set", rosterOnGazetteers, []string{"refine=auto"}, false},
		{"names, refine=off", rosterOnGazetteers, []string{"refine=off"}, true},
		{"names, capitalized=false", rosterOnGazetteers, []string{"capitalized=false"}, false},
		{"no names", noNames, nil, false},
	} {
		g, err := expand(t, fixture(t), c.text, c.set...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		label, _ := g.Node("label")
		names := slices.ContainsFunc(label.Inputs, func(in spec.Input) bool { return in.Port == "names" })
		if got := nodeParams(t, g, "label")["capitalized"] == true; got != c.phrases || names != c.phrases {
			t.Errorf("%s: label capitalized %v, reads the name lists %v; want %v", c.name, got, names, c.phrases)
		}
		if got := nodeParams(t, g, "noise[seed=1]")["unknown_as_entity"] == true; got != c.phrases {
			t.Errorf("%s: unknown_as_entity %v", c.name, got)
		}
		if _, refined := g.Node("refine"); refined == (c.phrases || slices.Contains(c.set, "refine=off")) {
			t.Errorf("%s: node refine %v, want it where there are no phrases (refine: auto)", c.name, refined)
		}
		if _, gated := g.Node("overlay-capitalized"); gated != (c.phrases && c.text == rosterOnGazetteers) {
			t.Errorf("%s: overlay-capitalized %v", c.name, gated)
		}
	}
	// negsample's default is false: it lost with the phrases.
	g, err := expand(t, fixture(t), `
method: negsample
params: {dev_file: test.conll}
inputs:
  train: ../../data/raw.txt
  gazetteers: [../../data/gaz/per.txt]
  names: [../../data/gaz/loc.txt]
  dev: ../../data
`)
	if err != nil {
		t.Fatal(err)
	}
	if p := nodeParams(t, g, "label"); p["capitalized"] == true {
		t.Errorf("negsample: label params %v", p)
	}
	// autoner's default is auto: its dev F1 rose with the phrases on both
	// stand-ins.
	autoner := strings.Replace(rosterOnGazetteers, "method: roster", "method: autoner", 1)
	autoner = strings.Replace(autoner, "seeds: [1, 2], partial: true, student: kl, miss_rate: 0.4, ", "", 1)
	if g, err = expand(t, fixture(t), autoner); err != nil {
		t.Fatal(err)
	}
	if p := nodeParams(t, g, "label"); p["capitalized"] != true {
		t.Errorf("autoner: label params %v", p)
	}
	if _, err := expand(t, fixture(t), rosterOnGazetteers, "capitalized=maybe"); err == nil || !strings.Contains(err.Error(), `"maybe" is not one of auto, true, false`) {
		t.Errorf("capitalized=maybe: %v", err)
	}
}

// With labels given as they are, capitalized adds node capitalized, which
// the taggers read in place of the train input, counting its phrases as
// entities; the name lists and stopwords then serve it alone.
func TestCapitalizedGivenLabels(t *testing.T) {
	g, err := expand(t, fixture(t), `
method: roster
params: {seeds: [1, 2], partial: true, miss_rate: 0, refine: off, capitalized: true}
inputs:
  train: ../../data/test.conll
  names: [../../data/gaz/loc.txt]
  dev: ../../data/test.conll
`)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := g.Node("capitalized")
	if !ok || n.Stage != distant.StageCapitalized {
		t.Fatalf("no %s node capitalized in %v", distant.StageCapitalized, ids(g))
	}
	noise, _ := g.Node("noise[seed=1]")
	if i := slices.IndexFunc(noise.Inputs, func(in spec.Input) bool { return in.Port == "corpus" }); i < 0 || noise.Inputs[i].Node != "capitalized" {
		t.Errorf("noise reads %+v, want capitalized's labels", noise.Inputs)
	}
	if p := nodeParams(t, g, "noise[seed=1]"); p["unknown_as_entity"] != true {
		t.Errorf("noise params %v", p)
	}
	if _, err := expand(t, fixture(t), "method: roster\nparams: {refine: off, capitalized: false}\ninputs:\n  train: ../../data/test.conll\n  names: [../../data/gaz/loc.txt]\n"); err == nil || !strings.Contains(err.Error(), "connect gazetteers too") {
		t.Errorf("names without gazetteers or capitalized: %v", err)
	}
}

func TestPartialSeedsRefuseTokenSettings(t *testing.T) {
	text := strings.Replace(rosterOnGazetteers, "partial: true,", "partial: true, gce: false,", 1)
	if _, err := expand(t, fixture(t), text); err == nil || !strings.Contains(err.Error(), "partial-label CRFs") {
		t.Errorf("gce with partial seeds: %v", err)
	}
	text = strings.Replace(rosterOnGazetteers, "  gazetteers: [../../data/gaz/per.txt]\n", "", 1)
	text = strings.Replace(text, "entry_sentences: true, ", "capitalized: false, ", 1)
	if _, err := expand(t, fixture(t), text); err == nil || !strings.Contains(err.Error(), "connect gazetteers too") {
		t.Errorf("names without gazetteers: %v", err)
	}
}

// Method distant's variant partial is the partial-label CRF, scored beside
// the labels of its test set.
func TestDistantPartialVariant(t *testing.T) {
	g, err := expand(t, fixture(t), `
method: distant
params: {variants: [partial], miss_rate: 0.3}
inputs:
  train: ../../data/raw.txt
  gazetteers: [../../data/gaz/per.txt]
  test: ../../data/test.conll
`)
	if err != nil {
		t.Fatal(err)
	}
	if p := nodeParams(t, g, "partial"); p["head"] != tagger.CRFHead || p["loss"] != tagger.LossPartial || p["miss_rate"] != 0.3 || p["drop_o"] != 0.0 {
		t.Errorf("partial params %v", p)
	}
	ev, _ := g.Node("test-partial")
	if i := slices.IndexFunc(ev.Inputs, func(in spec.Input) bool { return in.Port == "baseline" }); i < 0 || ev.Inputs[i].Node != "labels-test" {
		t.Errorf("test-partial inputs %+v", ev.Inputs)
	}
}

// With partial seeds the student is by default a CRF: the ensemble's labels
// train a partial-label CRF in place of the KL-distilled token classifier
// (at its own miss_rate), which is then the final model; self-training (of a token classifier) is
// off, and asking for it is an error.
func TestRosterCRFStudent(t *testing.T) {
	text := strings.Replace(rosterOnGazetteers, "partial: true, student: kl,", "partial: true,", 1) // student auto: crf
	g, err := expand(t, fixture(t), text)
	if err != nil {
		t.Fatal(err)
	}
	labels, _ := g.Node("ensemble-labels")
	if labels.Stage != ensemble.StageLabel || labels.Inputs[0].Node != "average" && labels.Inputs[1].Node != "average" {
		t.Errorf("ensemble-labels: %+v", labels)
	}
	// The seeds' miss_rate (0.4 here) is not the student's: its labels'
	// O is the ensemble's decision (student_miss_rate, 0.2 by default).
	if p := nodeParams(t, g, "distil"); p["head"] != tagger.CRFHead || p["loss"] != tagger.LossPartial || p["miss_rate"] != 0.2 {
		t.Errorf("distil params %v", p)
	}
	g2, err := expand(t, fixture(t), text, "student_miss_rate=0.05")
	if err != nil {
		t.Fatal(err)
	}
	if p := nodeParams(t, g2, "distil"); p["miss_rate"] != 0.05 {
		t.Errorf("student_miss_rate 0.05: distil's miss_rate %v", p["miss_rate"])
	}
	distil, _ := g.Node("distil")
	if i := slices.IndexFunc(distil.Inputs, func(in spec.Input) bool { return in.Port == "corpus" }); i < 0 || distil.Inputs[i].Node != "ensemble-labels" {
		t.Errorf("distil reads %+v, want the ensemble's labels as its corpus", distil.Inputs)
	}
	if _, ok := g.Node("selftrain"); ok {
		t.Error("a selftrain node after the crf student")
	}
	// The best of the seeds and the student on dev, then the best of it
	// with and without the gazetteer overlay.
	if got := modelOf(t, g, "overlay-fill"); got != "select" {
		t.Errorf("overlay-fill reads the model of %s, want select's (the best of the seeds and the student on dev)", got)
	}
	if got := modelOf(t, g, "register"); got != "overlay" {
		t.Errorf("register reads the model of %s, want overlay's", got)
	}
	text = strings.Replace(rosterOnGazetteers, "student: kl,", "student: crf, selftrain: true,", 1)
	if _, err := expand(t, fixture(t), text); err == nil || !strings.Contains(err.Error(), "set selftrain=false") {
		t.Errorf("crf student with self-training: %v", err)
	}
}

// The labels' per-type noise (type_miss_rates, mistype_rates) reaches
// every partial-label CRF that trains on the distant labels, negsample's
// span classifiers and autoner's Tie-or-Break, and only those: roster's CRF student
// learns the ensemble's labels, not the gazetteer's, at its own uniform
// student_miss_rate. Roster and bond without partial-label CRFs
// (partial=false, another recipe) refuse them; distant and autoner, whose
// specs list settings for several variants, let the variants without such
// a CRF ignore them, as they do miss_rate.
func TestLabelNoiseReachesThePartialCRFs(t *testing.T) {
	const noise = "type_miss_rates: [PER=0.8], mistype_rates: [PER=0.1, LOC=0.2], "
	wantMiss, wantMistype := []any{"PER=0.8"}, []any{"PER=0.1", "LOC=0.2"}
	bond := strings.Replace(strings.Replace(rosterOnGazetteers, "method: roster", "method: bond", 1), "seeds: [1, 2], partial: true, student: kl, ", "", 1)
	negsample := strings.Replace(strings.Replace(rosterOnGazetteers, "method: roster", "method: negsample", 1), "seeds: [1, 2], partial: true, student: kl, miss_rate: 0.4, ", noise, 1)
	for _, c := range []struct {
		text  string
		loss  string   // of the nodes trained on the labels
		nodes []string // trained on the labels
		not   []string // trained on something else
	}{
		{strings.Replace(rosterOnGazetteers, "partial: true, student: kl,", "partial: true, "+noise, 1), tagger.LossPartial, []string{"noise[seed=1]", "noise[seed=2]"}, []string{"distil"}},
		{strings.Replace(bond, "{", "{"+noise, 1), tagger.LossPartial, []string{"early"}, nil},
		{strings.Replace(autonerSpec, "{", "{"+noise, 1), tagger.LossPartial, []string{"fuzzy[seed=1]", "fuzzy[seed=2]"}, nil},
		{strings.Replace(autonerSpec, "{", "{"+noise, 1), tagger.LossTieBreak, []string{"tiebreak[seed=1]", "tiebreak[seed=2]"}, nil},
		{negsample, tagger.LossNegSample, []string{"train[sampling=uniform]", "train[sampling=weighted]"}, nil},
	} {
		g, err := expand(t, fixture(t), c.text)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.nodes {
			p := nodeParams(t, g, n)
			if p["loss"] != c.loss || !slices.Equal(p["type_miss_rates"].([]any), wantMiss) || !slices.Equal(p["mistype_rates"].([]any), wantMistype) {
				t.Errorf("%s: %v", n, p)
			}
		}
		for _, n := range c.not {
			if p := nodeParams(t, g, n); len(p["type_miss_rates"].([]any)) > 0 || len(p["mistype_rates"].([]any)) > 0 {
				t.Errorf("%s learns the ensemble's labels, not the gazetteer's, but has their noise: %v", n, p)
			}
		}
	}
	for _, text := range []string{
		strings.Replace(rosterOnGazetteers, "partial: true, student: kl,", "partial: false, "+noise, 1),
		strings.Replace(bond, "{", "{partial: false, "+noise, 1),
	} {
		if _, err := expand(t, fixture(t), text); err == nil || !strings.Contains(err.Error(), "type_miss_rates") || !strings.Contains(err.Error(), "mistype_rates") {
			t.Errorf("per-type noise without a partial-label CRF on the labels: %v\n%s", err, text)
		}
	}
}
