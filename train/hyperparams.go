package train

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nerflow/nerflow/stages"
)

// Hyperparams are every setting of a tagger and its training, declared once
// in the table of fields below: the stage train.tagger's parameters, the
// flags of nerflow train and the docs of nerflow stages train.tagger are
// derived from it, under one name each (flags spell it with dashes).
type Hyperparams struct {
	Model Config
	Run   TrainConfig
	// MinWordCount: see the VocabOption of that name.
	MinWordCount int
}

// DefaultHyperparams is DefaultConfig trained with DefaultTrainConfig.
func DefaultHyperparams() Hyperparams {
	return Hyperparams{Model: DefaultConfig(), Run: DefaultTrainConfig(), MinWordCount: 2}
}

// hyperparam binds one declared parameter to its field.
type hyperparam struct {
	stages.Param
	field any // *int, *float64, *string, *bool or *uint64
}

// fields is the table: each parameter's name, doc and range, with its
// default taken from h.
func (h *Hyperparams) fields() []hyperparam {
	m, r := &h.Model, &h.Run
	intp := func(p *int, name, doc string, opts ...stages.ParamOption) hyperparam {
		return hyperparam{stages.IntParam(name, *p, doc, opts...), p}
	}
	floatp := func(p *float64, name, doc string, opts ...stages.ParamOption) hyperparam {
		return hyperparam{stages.FloatParam(name, *p, doc, opts...), p}
	}
	stringp := func(p *string, name, doc string, opts ...stages.ParamOption) hyperparam {
		return hyperparam{stages.StringParam(name, *p, doc, opts...), p}
	}
	return []hyperparam{
		// Architecture.
		stringp(&m.Head, "head", "token (RoSTER's entity-vs-O and type classifier) or crf (linear-chain CRF)", stages.OneOf(HeadNames()...)),
		stringp(&m.Scheme, "scheme", "tag scheme the tagger predicts", stages.OneOf("io", "bio", "bioes")),
		intp(&m.Hidden, "hidden", "LSTM units per direction", stages.Range(1, 4096)),
		intp(&m.Layers, "layers", "BiLSTM layers", stages.Range(1, 8)),
		intp(&m.WordDim, "word_dim", "word vector size without pretrained vectors (else theirs)", stages.Range(1, 4096)),
		intp(&m.CharDim, "char_dim", "character vector size", stages.Range(1, 1024)),
		intp(&m.CharFilters, "char_filters", "character CNN filters", stages.Range(1, 4096)),
		intp(&m.CharKernel, "char_kernel", "character CNN width (odd)", stages.Range(1, 15)),
		intp(&m.CasingDim, "casing_dim", "casing feature size (0: none)", stages.Range(0, 256)),
		floatp(&m.Dropout, "dropout", "dropout on the word representations and the BiLSTM output", stages.Range(0, 0.95)),
		intp(&h.MinWordCount, "min_word_count", "occurrences a training word without a pretrained vector needs to get its own", stages.AtLeast(1)),
		// Loss and noise handling.
		stringp(&r.Loss, "loss", lossDoc(), stages.OneOf(LossNames()...)),
		floatp(&r.Q, "q", "exponent of generalized cross entropy", stages.Range(0, 1)),
		floatp(&r.Tau, "tau", "noisy-label removal: a distant label the model gives at most this probability is noise", stages.Range(0, 1)),
		intp(&r.UpdateInterval, "update_interval", "batches between noisy-label removals (0: no removal)", stages.AtLeast(0)),
		floatp(&r.DropO, "drop_o", "fraction of O tokens left out of the loss (1 with the crf head: partial annotation, the tags of O tokens marginalized)", stages.Range(0, 1)),
		{stages.BoolParam("unknown_as_entity", r.UnknownAsEntity, "tokens of the unknown type \"?\" count as entities of some type (else the loss ignores them)"), &r.UnknownAsEntity},
		// Optimization.
		intp(&r.Epochs, "epochs", "training epochs", stages.Range(1, 1000)),
		intp(&r.BatchSize, "batch_size", "sentences per batch", stages.Range(1, 4096)),
		floatp(&r.LearningRate, "learning_rate", "peak learning rate of Adam", stages.Range(1e-7, 1)),
		floatp(&r.Warmup, "warmup", "fraction of the steps of linear warm-up before linear decay", stages.Range(0, 1)),
		floatp(&r.MaxGradNorm, "max_grad_norm", "gradient norm clipping (0: none)", stages.AtLeast(0)),
		intp(&r.Patience, "patience", "stop after this many epochs without a better dev F1 (0: never)", stages.AtLeast(0)),
		{stages.IntParam("seed", int(r.Seed), "seed of the initial weights, batches, dropout and dropped O tokens", stages.AtLeast(0)), &r.Seed},
	}
}

// HyperparamDecls declares the hyperparameters as stage parameters, with
// the defaults of DefaultHyperparams.
func HyperparamDecls() []stages.Param { return DefaultHyperparams().Decls() }

// Decls declares the hyperparameters as stage parameters, with h's values
// as defaults (for a stage that trains the tagger with other defaults).
func (h Hyperparams) Decls() []stages.Param {
	var out []stages.Param
	for _, f := range h.fields() {
		out = append(out, f.Param)
	}
	return out
}

// HyperparamsOf reads the hyperparameters from a stage's parameters
// (declared with HyperparamDecls, so already checked).
func HyperparamsOf(p stages.Params) Hyperparams {
	h := DefaultHyperparams()
	for _, f := range h.fields() {
		switch v := f.field.(type) {
		case *int:
			*v = p.Int(f.Name)
		case *float64:
			*v = p.Float(f.Name)
		case *string:
			*v = p.String(f.Name)
		case *bool:
			*v = p.Bool(f.Name)
		case *uint64:
			*v = uint64(p.Int(f.Name))
		}
	}
	return h
}

// FlagName is the command-line spelling of a hyperparameter.
func FlagName(param string) string { return strings.ReplaceAll(param, "_", "-") }

// BindFlags declares one flag per hyperparameter, bound to h's fields, with
// h's values as defaults.
func (h *Hyperparams) BindFlags(fs *pflag.FlagSet) {
	for _, f := range h.fields() {
		name, doc := FlagName(f.Name), f.Doc
		switch v := f.field.(type) {
		case *int:
			fs.IntVar(v, name, *v, doc)
		case *float64:
			fs.Float64Var(v, name, *v, doc)
		case *string:
			fs.StringVar(v, name, *v, doc)
		case *bool:
			fs.BoolVar(v, name, *v, doc)
		case *uint64:
			fs.Uint64Var(v, name, *v, doc)
		}
	}
}

// Check validates h's values against the declared ranges and choices, as
// the stage's parameters are, naming each parameter that is out of bounds.
func (h *Hyperparams) Check() error {
	var errs []error
	for _, f := range h.fields() {
		var v any
		switch p := f.field.(type) {
		case *int:
			v = *p
		case *float64:
			v = *p
		case *string:
			v = *p
		case *bool:
			v = *p
		case *uint64:
			v = *p
		}
		if _, err := f.Convert(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Name, err))
		}
	}
	return errors.Join(errs...)
}
