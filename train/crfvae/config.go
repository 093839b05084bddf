package crfvae

import (
	"errors"
	"fmt"
	"slices"

	"github.com/nerflow/nerflow/stages"
)

// Config are the CRF-VAE's own hyperparameters, on top of the tagger's
// (tagger.Hyperparams), declared once in the table of fields below: the
// stage's parameters and their docs derive from it.
type Config struct {
	Generator string  `json:"generator"` // Factored or Transformer
	Beta      float64 `json:"beta"`      // weight of the prior term of the ELBO
	// Tau is the temperature of the relaxed perturb-and-MAP samples.
	Tau float64 `json:"tau"`
	// Weight multiplies the unlabeled loss added to each step.
	Weight   float64 `json:"unlabeled_weight"`
	GenDim   int     `json:"gen_dim"`   // tag embedding and transformer size
	GenVocab int     `json:"gen_vocab"` // generated words (the rest share one index)
	Heads    int     `json:"heads"`     // attention heads of the transformer
	// PriorO is the prior probability of the tag O; the rest is spread
	// evenly over the other tags ("simple" prior: 0.5).
	PriorO float64 `json:"prior_o"`
}

// DefaultConfig is the factored generator with the simple prior at beta 1;
// the unlabeled weight 0.1 is what CoNLL-2003 at 10% labels supported (at
// 1 the ELBO held the supervised learning back, docs/crfvae.md).
func DefaultConfig() Config {
	return Config{Generator: Factored, Beta: 1, Tau: 0.5, Weight: 0.1, GenDim: 32, GenVocab: 5000, Heads: 2, PriorO: 0.5}
}

// field binds one declared parameter to its field.
type field struct {
	stages.Param
	float *float64
	int   *int
	str   *string
}

func (c *Config) fields() []field {
	return []field{
		{Param: stages.StringParam("generator", c.Generator, "generative model of the tokens given the tags: factored (each token from its tag) or transformer (a one-layer transformer over the tag embeddings)", stages.OneOf(Generators...)), str: &c.Generator},
		{Param: stages.FloatParam("beta", c.Beta, "weight of the prior term E_q[log p(y)] in the ELBO", stages.Range(0, 100)), float: &c.Beta},
		{Param: stages.FloatParam("relax_tau", c.Tau, "temperature of the relaxed perturb-and-MAP samples (-> 0: one-hot Viterbi paths)", stages.Range(0.01, 10)), float: &c.Tau},
		{Param: stages.FloatParam("unlabeled_weight", c.Weight, "weight of the negative ELBO of the unlabeled sentences against the CRF loss", stages.Range(0.0001, 100)), float: &c.Weight},
		{Param: stages.IntParam("gen_dim", c.GenDim, "size of the generator's tag embeddings and transformer", stages.Range(2, 1024)), int: &c.GenDim},
		{Param: stages.IntParam("gen_vocab", c.GenVocab, "words the generator predicts, the most frequent of the unlabeled sentences (the others share one index)", stages.Range(2, 1_000_000)), int: &c.GenVocab},
		{Param: stages.IntParam("heads", c.Heads, "attention heads of the transformer generator (dividing gen_dim)", stages.Range(1, 64)), int: &c.Heads},
		{Param: stages.FloatParam("prior_o", c.PriorO, "prior probability of the tag O, the rest spread evenly over the other tags", stages.Range(0.01, 0.99)), float: &c.PriorO},
	}
}

// ConfigDecls declares the parameters with the defaults of DefaultConfig.
func ConfigDecls() []stages.Param {
	c := DefaultConfig()
	var out []stages.Param
	for _, f := range c.fields() {
		out = append(out, f.Param)
	}
	return out
}

// ConfigOf reads the parameters declared by ConfigDecls.
func ConfigOf(p stages.Params) Config {
	c := DefaultConfig()
	for _, f := range c.fields() {
		switch {
		case f.float != nil:
			*f.float = p.Float(f.Name)
		case f.int != nil:
			*f.int = p.Int(f.Name)
		case f.str != nil:
			*f.str = p.String(f.Name)
		}
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if !slices.Contains(Generators, c.Generator) {
		errs = append(errs, fmt.Errorf("generator %q: want one of %v", c.Generator, Generators))
	}
	if c.Tau <= 0 || c.Weight <= 0 || c.Beta < 0 {
		errs = append(errs, fmt.Errorf("relax_tau %v and unlabeled_weight %v must be positive, beta %v not negative", c.Tau, c.Weight, c.Beta))
	}
	if c.GenDim < 2 || c.GenVocab < 2 || c.Heads < 1 {
		errs = append(errs, fmt.Errorf("gen_dim %d, gen_vocab %d, heads %d too small", c.GenDim, c.GenVocab, c.Heads))
	}
	if c.Generator == Transformer && c.GenDim%c.Heads != 0 {
		errs = append(errs, fmt.Errorf("gen_dim %d is not a multiple of heads %d", c.GenDim, c.Heads))
	}
	if c.PriorO <= 0 || c.PriorO >= 1 {
		errs = append(errs, fmt.Errorf("prior_o %v, want (0, 1)", c.PriorO))
	}
	return errors.Join(errs...)
}
