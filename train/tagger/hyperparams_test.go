package tagger

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/nerflow/nerflow/stages"
)

// The stage parameters and the flags come from one table: same names,
// same defaults, read back into the same values.
func TestHyperparamsOneTable(t *testing.T) {
	stage := stages.Stage{Name: "test.tagger", Params: HyperparamDecls()}
	p, err := stage.ResolveParams(map[string]any{"hidden": 7, "learning_rate": 0.01, "loss": "gce", "seed": 3, "unknown_as_entity": true})
	if err != nil {
		t.Fatal(err)
	}
	h := HyperparamsOf(p)
	want := DefaultHyperparams()
	want.Model.Hidden, want.Run.LearningRate, want.Run.Loss, want.Run.Seed, want.Run.UnknownAsEntity = 7, 0.01, LossGCE, 3, true
	if h != want {
		t.Errorf("from params: %+v, want %+v", h, want)
	}

	fs := pflag.NewFlagSet("train", pflag.ContinueOnError)
	fh := DefaultHyperparams()
	fh.BindFlags(fs)
	if err := fs.Parse([]string{"--hidden", "7", "--learning-rate", "0.01", "--loss", "gce", "--seed", "3", "--unknown-as-entity"}); err != nil {
		t.Fatal(err)
	}
	if fh != want {
		t.Errorf("from flags: %+v, want %+v", fh, want)
	}
	for _, decl := range HyperparamDecls() {
		f := fs.Lookup(FlagName(decl.Name))
		if f == nil || f.Usage != decl.Doc {
			t.Errorf("param %s has no flag with its doc (%v)", decl.Name, f)
		}
	}

	fh.Model.Dropout, fh.Run.Loss = 0.99, "hinge"
	err = fh.Check()
	if err == nil || !strings.Contains(err.Error(), "dropout") || !strings.Contains(err.Error(), "loss") {
		t.Errorf("out of range: %v", err)
	}
}

// Heads and losses are registered by name; the stage's choices are the
// registered ones, and a loss trains only its own head.
func TestHeadAndLossRegistries(t *testing.T) {
	if got := HeadNames(); !slices.Equal(got, []string{CRFHead, SpanHead, TieBreakHead, TokenHead}) {
		t.Errorf("heads %v", got)
	}
	// plugin_test.go, in the same test binary, registers one of its own.
	builtin := slices.DeleteFunc(LossNames(), func(name string) bool { return strings.HasPrefix(name, "test-") })
	if got := builtin; !slices.Equal(got, []string{LossCE, LossCRF, LossGCE, LossKL, LossNegSample, LossPartial, LossTagSets, LossTieBreak}) {
		t.Errorf("losses %v", got)
	}
	for _, decl := range HyperparamDecls() {
		switch decl.Name {
		case "head":
			if !slices.Equal(decl.Enum, HeadNames()) {
				t.Errorf("param head: %v", decl.Enum)
			}
		case "loss":
			if !slices.Equal(decl.Enum, LossNames()) || !strings.Contains(decl.Doc, "gce (token head)") {
				t.Errorf("param loss: %v %q", decl.Enum, decl.Doc)
			}
		}
	}
	cfg := DefaultTrainConfig()
	if err := checkLoss(LossCRF, TokenHead, cfg); err == nil || !strings.Contains(err.Error(), "trains the crf head") {
		t.Errorf("crf loss on the token head: %v", err)
	}
	cfg.Q = 0
	if err := checkLoss(LossGCE, TokenHead, cfg); err == nil || !strings.Contains(err.Error(), "q") {
		t.Errorf("gce with q 0: %v", err)
	}
	if err := checkLoss("hinge", TokenHead, cfg); err == nil || !strings.Contains(err.Error(), "want one of ce, crf, gce, kl, negsample") {
		t.Errorf("unknown loss: %v", err)
	}
}
