package tagger

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/nerflow/nerflow/stages"
)

// The stage parameters and the flags come from one table: same names,
// same defaults, read back into the same values, the losses' own
// parameters among them.
func TestHyperparamsOneTable(t *testing.T) {
	stage := stages.Stage{Name: "test.tagger", Params: HyperparamDecls()}
	p, err := stage.ResolveParams(map[string]any{"hidden": 7, "learning_rate": 0.01, "loss": "gce", "seed": 3, "unknown_as_entity": true,
		"q": 0.5, "update_interval": 20, "miss_rate": 0.2})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultHyperparams()
	want.Model.Hidden, want.Run.LearningRate, want.Run.Loss, want.Run.Seed, want.Run.UnknownAsEntity = 7, 0.01, LossGCE, 3, true
	wantOwn := map[string]any{"q": 0.5, "update_interval": int64(20), "tau": 0.7}
	check := func(from string, h Hyperparams) {
		t.Helper()
		gce, _ := lookupLoss(LossGCE)
		own, err := ownParams(gce, h.Run)
		if err != nil {
			t.Fatalf("from %s: %v", from, err)
		}
		if !reflect.DeepEqual(own.Map(), wantOwn) {
			t.Errorf("from %s: gce's parameters %v, want %v", from, own.Map(), wantOwn)
		}
		if h.Run.LossParams["miss_rate"] != 0.2 {
			t.Errorf("from %s: miss_rate %v, want 0.2 kept for loss partial", from, h.Run.LossParams["miss_rate"])
		}
		h.Run.LossParams = nil
		if !reflect.DeepEqual(h, want) {
			t.Errorf("from %s: %+v, want %+v", from, h, want)
		}
	}
	check("params", HyperparamsOf(p))

	fs := pflag.NewFlagSet("train", pflag.ContinueOnError)
	fh := DefaultHyperparams()
	fh.BindFlags(fs)
	for _, decl := range HyperparamDecls() {
		f := fs.Lookup(FlagName(decl.Name))
		if f == nil || f.Usage != decl.Doc {
			t.Errorf("param %s has no flag with its doc (%v)", decl.Name, f)
			continue
		}
		if want := fmt.Sprint(decl.Default); f.DefValue != want {
			t.Errorf("flag %s: default %q, want %q", f.Name, f.DefValue, want)
		}
	}
	for flag, typ := range map[string]string{"q": "float64", "update-interval": "int", "sampling": "string"} {
		if got := fs.Lookup(flag).Value.Type(); got != typ {
			t.Errorf("flag %s: type %s, want %s", flag, got, typ)
		}
	}
	if err := fs.Parse([]string{"--hidden", "7", "--learning-rate", "0.01", "--loss", "gce", "--seed", "3", "--unknown-as-entity",
		"--q", "0.5", "--update-interval", "20", "--miss-rate", "0.2"}); err != nil {
		t.Fatal(err)
	}
	check("flags", fh)
	if err := fs.Parse([]string{"--neg-ratio", "x"}); err == nil {
		t.Error("--neg-ratio x: no error")
	}

	fh.Model.Dropout, fh.Run.Loss = 0.99, "hinge"
	fh.Run.SetLossParam("mu", 100.0)
	err = fh.Check()
	if err == nil || !strings.Contains(err.Error(), "dropout") || !strings.Contains(err.Error(), "loss") || !strings.Contains(err.Error(), "mu") {
		t.Errorf("out of range: %v", err)
	}
}

// Each loss declares its own parameters; the stage declares each once,
// under the names, defaults and docs it had when they were fields of
// TrainConfig, and the loss that owns one is the loss that reads it.
func TestLossParamsDeclaredByTheirLosses(t *testing.T) {
	owners := map[string][]string{}
	for _, name := range LossNames() {
		l, _ := lookupLoss(name)
		for _, p := range paramsOf(l) {
			owners[p.Name] = append(owners[p.Name], name)
		}
	}
	want := map[string]struct {
		def    any
		owners []string
	}{
		"q":               {0.7, []string{LossGCE}},
		"tau":             {0.7, []string{LossCE, LossGCE}},
		"update_interval": {int64(0), []string{LossCE, LossGCE}},
		"sampling":        {SamplingUniform, []string{LossNegSample}},
		"neg_ratio":       {0.35, []string{LossNegSample}},
		"mu":              {8.0, []string{LossNegSample}},
		"miss_rate":       {0.5, []string{LossPartial, LossTieBreak}},
	}
	decls := map[string]stages.Param{}
	for _, p := range HyperparamDecls() {
		if _, dup := decls[p.Name]; dup {
			t.Errorf("param %s declared twice", p.Name)
		}
		decls[p.Name] = p
	}
	for name, w := range want {
		if got := owners[name]; !slices.Equal(got, w.owners) {
			t.Errorf("param %s declared by the losses %v, want %v", name, got, w.owners)
		}
		if d, ok := decls[name]; !ok || d.Default != w.def {
			t.Errorf("param %s of the stage: %+v, want default %v", name, d, w.def)
		}
	}
	// The test plug-in's parameter (plugin_test.go) is the stage's too.
	if _, ok := decls["label_smoothing"]; !ok {
		t.Error("the plug-in loss's parameter label_smoothing is not declared")
	}
}

// A loss's parameter reaches the loss, and only the chosen loss's are
// read: another loss's value is left alone, however out of place, but a
// name no loss declares is refused.
func TestLossGetsItsOwnParams(t *testing.T) {
	cfg := DefaultTrainConfig()
	cfg.Loss = LossPartial
	cfg.SetLossParam("miss_rate", 0.25)
	cfg.SetLossParam("q", 0.3)
	cfg.SetLossParam("sampling", SamplingWeighted)
	l, err := configureLoss(cfg, CRFHead)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.(partialLoss).missRate; got != 0.25 {
		t.Errorf("partial's miss rate %v, want 0.25", got)
	}
	cfg.Loss = LossGCE
	if l, err = configureLoss(cfg, TokenHead); err != nil || l.(gceLoss).q != 0.3 || l.(gceLoss).removes != (noisyLabelRemoval{tau: 0.7}) {
		t.Errorf("gce: %+v, %v", l, err)
	}
	cfg.Loss = LossNegSample
	if l, err = configureLoss(cfg, SpanHead); err != nil || !reflect.DeepEqual(l.(negSampleLoss), negSampleLoss{sampling: SamplingWeighted, negRatio: 0.35, mu: 8}) {
		t.Errorf("negsample: %+v, %v", l, err)
	}
	cfg.SetLossParam("qq", 0.3)
	if _, err = configureLoss(cfg, SpanHead); err == nil || !strings.Contains(err.Error(), `"qq"`) {
		t.Errorf("an undeclared parameter: %v", err)
	}
}

// Noisy-label removal asked of a loss that cannot do it is refused, as
// when it was a setting of every run; update_interval 0, the stage's
// default, asks for nothing.
func TestRemovalNeedsAHardTokenLoss(t *testing.T) {
	for _, c := range []struct{ loss, head string }{{LossCRF, CRFHead}, {LossPartial, CRFHead}, {LossKL, TokenHead}, {LossNegSample, SpanHead}} {
		cfg := DefaultTrainConfig()
		cfg.Loss = c.loss
		cfg.SetLossParam("update_interval", 0)
		if err := cfg.validate(c.head); err != nil {
			t.Errorf("%s without removal: %v", c.loss, err)
		}
		cfg.SetLossParam("update_interval", 5)
		if err := cfg.validate(c.head); err == nil || !strings.Contains(err.Error(), "noisy-label removal") {
			t.Errorf("%s with removal: %v", c.loss, err)
		}
	}
	cfg := DefaultTrainConfig()
	cfg.SetLossParam("update_interval", 5)
	cfg.SetLossParam("tau", 1.0)
	if err := cfg.validate(TokenHead); err == nil || !strings.Contains(err.Error(), "tau") {
		t.Errorf("ce with removal at tau 1: %v", err)
	}
	cfg.SetLossParam("tau", 0.6)
	l, err := configureLoss(cfg, TokenHead)
	if err != nil || removalOfLoss(l) != (noisyLabelRemoval{interval: 5, tau: 0.6}) {
		t.Errorf("ce with removal: %+v, %v", l, err)
	}
}

// paramLoss is a loss that declares the parameters given, for
// registrations that must fail.
type paramLoss struct {
	ceLoss
	params []stages.Param
}

func (l paramLoss) Params() []stages.Param { return l.params }

// A loss's parameter may not take a name of the tagger's own, nor redeclare
// another loss's differently; the loss is then not registered.
func TestRegisterLossRefusesClashingParams(t *testing.T) {
	for _, p := range []stages.Param{
		stages.IntParam("epochs", 3, "a clash with the tagger's own"),
		stages.FloatParam("q", 0.5, "exponent of generalized cross entropy", stages.Range(0, 1)),
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("a loss declaring %+v was registered", p)
				}
			}()
			RegisterLoss("test-clash-"+p.Name, paramLoss{params: []stages.Param{p}})
		}()
		if slices.Contains(LossNames(), "test-clash-"+p.Name) {
			t.Errorf("test-clash-%s registered", p.Name)
		}
	}
}

// SetLossParam copies: a TrainConfig copied by value keeps its values.
func TestSetLossParamCopies(t *testing.T) {
	a := DefaultTrainConfig()
	a.SetLossParam("q", 0.5)
	b := a
	b.SetLossParam("q", 0.9)
	if a.LossParams["q"] != 0.5 || b.LossParams["q"] != 0.9 {
		t.Errorf("a %v, b %v", a.LossParams, b.LossParams)
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
	cfg.Loss = LossCRF
	if _, err := configureLoss(cfg, TokenHead); err == nil || !strings.Contains(err.Error(), "trains the crf head") {
		t.Errorf("crf loss on the token head: %v", err)
	}
	cfg.Loss = LossGCE
	cfg.SetLossParam("q", 0)
	if _, err := configureLoss(cfg, TokenHead); err == nil || !strings.Contains(err.Error(), "q") {
		t.Errorf("gce with q 0: %v", err)
	}
	cfg.Loss = "hinge"
	if _, err := configureLoss(cfg, TokenHead); err == nil || !strings.Contains(err.Error(), "want one of ce, crf, gce, kl, negsample") {
		t.Errorf("unknown loss: %v", err)
	}
}

// FitParams are train.tagger's own declarations of the fit settings, with
// the defaults given.
func TestFitParamsAreTheTaggers(t *testing.T) {
	d := DefaultTrainConfig()
	for _, p := range FitParams(d) {
		if want := Param(p.Name); !reflect.DeepEqual(p, want) {
			t.Errorf("%s: %+v, train.tagger declares %+v", p.Name, p, want)
		}
	}
	d.BatchSize, d.Patience = 16, 3
	for _, p := range FitParams(d) {
		if (p.Name == "batch_size" && p.Default != int64(16)) || (p.Name == "patience" && p.Default != int64(3)) {
			t.Errorf("%s: default %v", p.Name, p.Default)
		}
	}
	if got := len(FitParams(d)); got != 5 {
		t.Errorf("%d fit params, want batch_size, learning_rate, warmup, max_grad_norm and patience", got)
	}
}
