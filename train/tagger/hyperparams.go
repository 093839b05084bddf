package tagger

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
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

// Hyperparam binds one declared parameter to the field holding its value:
// a table of them declares a stage's parameters and reads them back
// (DeclsOf, ReadInto), for the tagger here and the other models trained on
// libtorch.
type Hyperparam struct {
	stages.Param
	Field any // *int, *float64, *string, *bool, *uint64 or a lossParamSlot
}

// lossParamSlot binds a loss's parameter to its value in a TrainConfig's
// LossParams, the declared default while it has none.
type lossParamSlot struct{ run *TrainConfig }

func (s lossParamSlot) get(p stages.Param) any {
	if v, ok := s.run.LossParams[p.Name]; ok {
		if c, err := p.Convert(v); err == nil {
			return c
		}
		return v
	}
	return p.Default
}

// lossFields binds every registered loss's parameters (lossParams) to r's
// LossParams, defaulting to the values there.
func lossFields(r *TrainConfig) []Hyperparam {
	var out []Hyperparam
	for _, p := range lossParams() {
		slot := lossParamSlot{r}
		p.Default = slot.get(p)
		out = append(out, Hyperparam{p, slot})
	}
	return out
}

// IntField declares an int parameter bound to *p, defaulting to its value.
func IntField(p *int, name, doc string, opts ...stages.ParamOption) Hyperparam {
	return Hyperparam{stages.IntParam(name, *p, doc, opts...), p}
}

// FloatField declares a float parameter bound to *p.
func FloatField(p *float64, name, doc string, opts ...stages.ParamOption) Hyperparam {
	return Hyperparam{stages.FloatParam(name, *p, doc, opts...), p}
}

// StringField declares a string parameter bound to *p.
func StringField(p *string, name, doc string, opts ...stages.ParamOption) Hyperparam {
	return Hyperparam{stages.StringParam(name, *p, doc, opts...), p}
}

// SeedField declares a seed, an int parameter bound to a *uint64.
func SeedField(p *uint64, doc string) Hyperparam {
	return Hyperparam{stages.IntParam("seed", int(*p), doc, stages.AtLeast(0)), p}
}

// DeclsOf returns the parameters a table declares.
func DeclsOf(fields []Hyperparam) []stages.Param {
	out := make([]stages.Param, len(fields))
	for i, f := range fields {
		out[i] = f.Param
	}
	return out
}

// ReadInto sets every field of a table from a stage's parameters (declared
// with DeclsOf, so already checked).
func ReadInto(fields []Hyperparam, p stages.Params) {
	for _, f := range fields {
		switch v := f.Field.(type) {
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
		case lossParamSlot:
			v.run.SetLossParam(f.Name, p.Map()[f.Name])
		}
	}
}

// fields is the table: each parameter's name, doc and range, with its
// default taken from h; the losses' own parameters, each declared by its
// loss (ConfigurableLoss), follow loss.
func (h *Hyperparams) fields() []Hyperparam {
	shared := sharedFields(h)
	at := slices.IndexFunc(shared, func(f Hyperparam) bool { return f.Name == "loss" }) + 1
	return slices.Insert(shared, at, lossFields(&h.Run)...)
}

// sharedFields is the table without the losses' own parameters.
func sharedFields(h *Hyperparams) []Hyperparam {
	m, r := &h.Model, &h.Run
	intp, floatp, stringp := IntField, FloatField, StringField
	return append([]Hyperparam{
		// Architecture.
		stringp(&m.Head, "head", "token (RoSTER's entity-vs-O and type classifier), crf (linear-chain CRF) or span (span classifier, for negative sampling)", stages.OneOf(HeadNames()...)),
		SchemeField(&m.Scheme, "tag scheme the tagger predicts"),
		intp(&m.Hidden, "hidden", "LSTM units per direction", stages.Range(1, 4096)),
		intp(&m.Layers, "layers", "BiLSTM layers", stages.Range(1, 8)),
		intp(&m.WordDim, "word_dim", "word vector size without pretrained vectors (else theirs)", stages.Range(1, 4096)),
		intp(&m.CharDim, "char_dim", "character vector size", stages.Range(1, 1024)),
		intp(&m.CharFilters, "char_filters", "character CNN filters", stages.Range(1, 4096)),
		intp(&m.CharKernel, "char_kernel", "character CNN width (odd)", stages.Range(1, 15)),
		intp(&m.CasingDim, "casing_dim", "casing feature size (0: none)", stages.Range(0, 256)),
		intp(&m.MaxSpan, "max_span", "span head: longest span scored and predicted, in tokens", stages.Range(1, 64)),
		floatp(&m.Dropout, "dropout", "dropout on the word representations and the BiLSTM output", stages.Range(0, 0.95)),
		floatp(&m.WordDropout, "word_dropout", "probability that a training token reads as the unknown word, its characters and casing kept (words the gazetteer lacks are then tagged from spelling and context)", stages.Range(0, 0.95)),
		stringp(&m.LMPlacement, "lm_placement", "TagLM: where a language model's states join the tagger: none, input (with the word representation) or layer1 (with the first BiLSTM layer's output; needs layers >= 2)", stages.OneOf(LMPlacements()...)),
		stringp(&m.EncoderPlacement, "encoder_placement", "where a fine-tuned encoder's states (input encoder) go: none, under (beside the word representation, under the BiLSTM) or replace (straight to the head, no BiLSTM)", stages.OneOf(EncoderPlacements()...)),
		intp(&h.MinWordCount, "min_word_count", "occurrences a training word without a pretrained vector needs to get its own", stages.AtLeast(1)),
		// Loss and noise handling.
		stringp(&r.Loss, "loss", lossDoc(), stages.OneOf(LossNames()...)),
		floatp(&r.DropO, "drop_o", "fraction of O tokens left out of the loss (1 with the crf head: partial annotation, the tags of O tokens marginalized)", stages.Range(0, 1)),
		{stages.BoolParam("unknown_as_entity", r.UnknownAsEntity, "tokens of the unknown type \"?\" count as entities of some type (else the loss ignores them)"), &r.UnknownAsEntity},
		// Optimization.
		intp(&r.Epochs, "epochs", "training epochs", stages.Range(1, 1000)),
		batchSizeField(&r.BatchSize),
	}, slices.Concat(OptimizerFields(&r.LearningRate, &r.Warmup, &r.MaxGradNorm), EncoderFields(&r.EncoderLearningRate, &r.EncoderWarmup), []Hyperparam{
		patienceField(&r.Patience),
		intp(&r.EvalEvery, "eval_every", "score on the dev set every this many steps too, not only after each epoch, keeping the best step's weights (0: per epoch; -1: auto, an eighth of an epoch and at least 50 steps)", stages.AtLeast(EvalAuto)),
		intp(&r.MinSteps, "min_steps", "train at least this many steps: epochs is raised to ceil(min_steps / steps per epoch) where that is more, and patience counts only from then on (0: epochs as given)", stages.AtLeast(0)),
		SeedField(&r.Seed, "seed of the initial weights, batches, dropout and dropped O tokens"),
	})...)
}

// EncoderFields declares the learning-rate schedule of a fine-tuned
// encoder's weights (TrainConfig's EncoderLearningRate, EncoderWarmup),
// bound to the fields given and defaulting to their values.
func EncoderFields(learningRate, warmup *float64) []Hyperparam {
	return []Hyperparam{
		FloatField(learningRate, "encoder_learning_rate", "peak learning rate of a fine-tuned encoder's weights (0: frozen)", stages.Range(0, 1)),
		FloatField(warmup, "encoder_warmup", "fraction of the steps of the encoder's linear warm-up, before the same decay as the tagger's", stages.Range(0, 1)),
	}
}

// EncoderParams declares encoder_learning_rate and encoder_warmup with d's
// values as defaults, for a stage that continues training a tagger that
// may carry a fine-tuned encoder (the self-training stages).
func EncoderParams(d TrainConfig) []stages.Param {
	return DeclsOf(EncoderFields(&d.EncoderLearningRate, &d.EncoderWarmup))
}

// Schemes are the tag schemes a tagger predicts in.
func Schemes() []string { return []string{"io", "bio", "bioes"} }

// SchemeParam declares a stage's or a method's tag scheme, one of Schemes.
func SchemeParam(def, doc string) stages.Param {
	return stages.StringParam("scheme", def, doc, stages.OneOf(Schemes()...))
}

// SchemeField is SchemeParam bound to *p, defaulting to its value.
func SchemeField(p *string, doc string) Hyperparam { return Hyperparam{SchemeParam(*p, doc), p} }

// OptimizerFields declares the optimizer's hyperparameters that every
// model trained on kit.Fit shares (kit.FitConfig): the peak learning rate,
// the warm-up fraction and the clipping norm, bound to the fields given and
// defaulting to their values.
func OptimizerFields(learningRate, warmup, maxGradNorm *float64) []Hyperparam {
	return []Hyperparam{
		FloatField(learningRate, "learning_rate", "peak learning rate of Adam", stages.Range(1e-7, 1)),
		FloatField(warmup, "warmup", "fraction of the steps of linear warm-up before linear decay", stages.Range(0, 1)),
		FloatField(maxGradNorm, "max_grad_norm", "gradient norm clipping (0: none)", stages.AtLeast(0)),
	}
}

func batchSizeField(p *int) Hyperparam {
	return IntField(p, "batch_size", "sentences per batch", stages.Range(1, 4096))
}

func patienceField(p *int) Hyperparam {
	return IntField(p, "patience", "stop after this many evaluations on the dev set without a better F1 (0: never)", stages.AtLeast(0))
}

// FitParams declares, with d's values as defaults, the fit settings that a
// stage training a tagger with a loop of its own (package selftrain)
// shares with train.tagger: the batch size, the optimizer's
// (OptimizerFields) and the patience, under train.tagger's declarations.
func FitParams(d TrainConfig) []stages.Param {
	fields := append([]Hyperparam{batchSizeField(&d.BatchSize)}, OptimizerFields(&d.LearningRate, &d.Warmup, &d.MaxGradNorm)...)
	return DeclsOf(append(fields, patienceField(&d.Patience)))
}

// OptimizerParams is OptimizerFields for a stage that reads its parameters
// itself: their declarations, with these defaults.
func OptimizerParams(learningRate, warmup, maxGradNorm float64) []stages.Param {
	return DeclsOf(OptimizerFields(&learningRate, &warmup, &maxGradNorm))
}

// Param is the tagger's declaration of the hyperparameter name, with its
// default, for a method that exposes it as its own; it panics on a name
// the tagger does not declare (a programming error, met at init).
func Param(name string) stages.Param {
	for _, p := range HyperparamDecls() {
		if p.Name == name {
			return p
		}
	}
	panic("tagger: no hyperparameter " + name)
}

// HyperparamDecls declares the hyperparameters as stage parameters, with
// the defaults of DefaultHyperparams.
func HyperparamDecls() []stages.Param { return DefaultHyperparams().Decls() }

// Decls declares the hyperparameters as stage parameters, with h's values
// as defaults (for a stage that trains the tagger with other defaults).
func (h Hyperparams) Decls() []stages.Param { return DeclsOf(h.fields()) }

// HyperparamsOf reads the hyperparameters from a stage's parameters
// (declared with HyperparamDecls, so already checked).
func HyperparamsOf(p stages.Params) Hyperparams {
	h := DefaultHyperparams()
	ReadInto(h.fields(), p)
	return h
}

// FlagName is the command-line spelling of a hyperparameter.
func FlagName(param string) string { return strings.ReplaceAll(param, "_", "-") }

// BindFlags declares one flag per hyperparameter, bound to h's fields, with
// h's values as defaults.
func (h *Hyperparams) BindFlags(fs *pflag.FlagSet) {
	for _, f := range h.fields() {
		name, doc := FlagName(f.Name), f.Doc
		switch v := f.Field.(type) {
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
		case lossParamSlot:
			fl := fs.VarPF(lossParamFlag{f.Param, v}, name, "", doc)
			if f.Type == stages.Bool {
				fl.NoOptDefVal = "true"
			}
		}
	}
}

// lossParamFlag is the flag of a loss's parameter, which pflag shows as it
// does a flag of the parameter's type.
type lossParamFlag struct {
	p    stages.Param
	slot lossParamSlot
}

func (f lossParamFlag) String() string {
	switch v := f.slot.get(f.p).(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	default:
		return fmt.Sprint(v)
	}
}

func (f lossParamFlag) Set(s string) error {
	v, err := f.p.Convert(s)
	if err != nil {
		return err
	}
	f.slot.run.SetLossParam(f.p.Name, v)
	return nil
}

// Type is the name pflag gives a flag of the parameter's type.
func (f lossParamFlag) Type() string {
	switch f.p.Type {
	case stages.Int:
		return "int"
	case stages.Float:
		return "float64"
	}
	return string(f.p.Type)
}

// Check validates h's values against the declared ranges and choices, as
// the stage's parameters are, naming each parameter that is out of bounds.
func (h *Hyperparams) Check() error {
	var errs []error
	for _, f := range h.fields() {
		var v any
		switch p := f.Field.(type) {
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
		case lossParamSlot:
			v = p.get(f.Param)
		}
		if _, err := f.Convert(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Name, err))
		}
	}
	return errors.Join(errs...)
}
