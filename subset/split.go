package subset

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
)

// StageSplit is the name of the low-resource split stage.
const StageSplit = "subset.split"

// Files of the split's outputs.
const (
	UnlabeledFile = "unlabeled.txt"
	ReportFile    = "report.json"
)

// SplitConfig says how much of a corpus a low-resource split keeps: the
// fraction of the sentences kept with their tags and the fraction, disjoint
// from it, given as text alone. Rest gives every sentence not kept labeled
// as text (the CRF-VAE setting), whatever Unlabeled says.
type SplitConfig struct {
	Labeled   float64 `json:"labeled"`
	Unlabeled float64 `json:"unlabeled"`
	Rest      bool    `json:"rest"`
	Seed      uint64  `json:"seed"`
}

// SplitSizes are the sizes of the two parts of a corpus of n sentences:
// the fractions of n rounded to the nearest sentence, so that a split's
// sizes do not depend on the seed.
func (cfg SplitConfig) SplitSizes(n int) (labeled, unlabeled int, err error) {
	labeled = int(math.Round(cfg.Labeled * float64(n)))
	if cfg.Rest {
		return labeled, n - labeled, nil
	}
	unlabeled = int(math.Round(cfg.Unlabeled * float64(n)))
	if labeled+unlabeled > n {
		return 0, 0, fmt.Errorf("labeled %g and unlabeled %g of %d sentences are %d + %d sentences, more than the corpus has",
			cfg.Labeled, cfg.Unlabeled, n, labeled, unlabeled)
	}
	return labeled, unlabeled, nil
}

// Split draws a seeded sample of the sentences of c: the indexes of the
// sentences kept labeled and of those given as unlabeled text, disjoint,
// each in corpus order (so that the parts read like the corpus, and a
// larger fraction with the same seed extends a smaller one: the sample is
// a prefix of one permutation of the corpus).
func Split(n int, cfg SplitConfig) (labeled, unlabeled []int, err error) {
	nl, nu, err := cfg.SplitSizes(n)
	if err != nil {
		return nil, nil, err
	}
	perm := rand.New(rand.NewPCG(cfg.Seed, 0x5b1)).Perm(n)
	labeled, unlabeled = perm[:nl:nl], perm[nl:nl+nu]
	slices.Sort(labeled)
	slices.Sort(unlabeled)
	return labeled, unlabeled, nil
}

// Part is what a split's report says of one part.
type Part struct {
	Sentences int            `json:"sentences"`
	Tokens    int            `json:"tokens"`
	Entities  map[string]int `json:"entities,omitempty"` // per type, labeled part only
}

// SplitReport is report.json of subset.split.
type SplitReport struct {
	Config    SplitConfig `json:"config"`
	Corpus    Part        `json:"corpus"`
	Labeled   Part        `json:"labeled"`
	Unlabeled Part        `json:"unlabeled"`
}

func init() {
	params := []stages.Param{
		stages.FloatParam("labeled", 0.1, "fraction of the sentences kept with their tags", stages.Range(0, 1)),
		stages.FloatParam("unlabeled", 0.5, "fraction of the sentences, disjoint from the labeled ones, given as text alone", stages.Range(0, 1)),
		stages.BoolParam("unlabeled_rest", false, "give every sentence not kept labeled as text (overrides unlabeled)"),
		stages.IntParam("seed", 1, "seed of the sample", stages.AtLeast(0)),
		stages.StringParam("format", string(corpus.FormatCoNLL), "format of the labeled corpus", stages.OneOf("conll", "jsonl", "jsonl-spans", "ck")),
		stages.StringParam("scheme", "", "tag scheme of the corpus, for the entity counts of the report (empty: the input's, else bio)", stages.OneOf("", "io", "bio", "iob1", "bioes")),
	}
	stages.Register(stages.Stage{
		Name:    StageSplit,
		Version: 1,
		Doc: "Low-resource split of a labeled corpus: a seeded sample of a fraction of the sentences kept labeled " +
			"and a disjoint fraction given as unlabeled text (VSL: 10% and 50%; CRF-VAE: 10% and the rest).",
		Params: append(params, dataset.SourceParams("corpus", "labeled sentences")...),
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "sentences with tags"},
		},
		Outputs: []stages.Port{
			{Name: "labeled", Kind: "corpus", Doc: "the sentences kept labeled, in corpus order"},
			{Name: "unlabeled", Kind: "text", Doc: UnlabeledFile + ": the unlabeled sentences' tokens, one sentence per line, in corpus order"},
			{Name: "report", Kind: "report", Doc: ReportFile + ": sentences, tokens and entities of the corpus and each part"},
		},
		Run: runSplit,
	})
}

func runSplit(c *stages.Context) error {
	p := c.Params
	cfg := SplitConfig{Labeled: p.Float("labeled"), Unlabeled: p.Float("unlabeled"), Rest: p.Bool("unlabeled_rest"), Seed: uint64(p.Int("seed"))}
	in := c.Input("corpus")
	full, err := dataset.ReadInput(in, p, "corpus")
	if err != nil {
		return err
	}
	schemeName := p.String("scheme")
	if schemeName == "" {
		schemeName = in.Meta[dataset.MetaScheme]
	}
	if schemeName == "" {
		schemeName = "bio"
	}
	scheme, err := corpus.ParseScheme(schemeName)
	if err != nil {
		return stages.Permanent(err)
	}
	for i, s := range full.Sentences {
		if s.Tags == nil && len(s.Tokens) > 0 {
			return stages.Permanent(fmt.Errorf("input corpus: sentence %d (%q) has no tags: a split keeps tags, give it a labeled corpus", i+1, clip(s.Tokens)))
		}
	}
	li, ui, err := Split(len(full.Sentences), cfg)
	if err != nil {
		return stages.Permanent(fmt.Errorf("input corpus: %w", err))
	}
	if len(li) == 0 {
		return stages.Permanent(fmt.Errorf("input corpus: labeled %g of %d sentences keeps no sentence", cfg.Labeled, len(full.Sentences)))
	}
	labeled, unlabeled := pick(full, li, true), pick(full, ui, false)
	rep := SplitReport{Config: cfg, Corpus: partOf(full, nil), Labeled: partOf(labeled, &scheme), Unlabeled: partOf(unlabeled, nil)}
	if rep.Labeled.Entities == nil {
		// A corpus in another scheme than declared: counts are a report's
		// nicety, the split itself does not need them.
		c.Log.Warn("no entity counts: the tags are not in the scheme", "scheme", scheme)
	}
	c.Log.Info("split", "sentences", rep.Corpus.Sentences, "labeled", rep.Labeled.Sentences, "unlabeled", rep.Unlabeled.Sentences)

	format := corpus.Format(p.String("format"))
	if err := dataset.WriteTagged(c.Output("labeled"), "labeled", labeled, format, scheme); err != nil {
		return err
	}
	text := c.Output("unlabeled")
	text.SetMeta(dataset.MetaFormat, string(corpus.FormatText))
	if err := dataset.WriteCorpus(text, UnlabeledFile, unlabeled, corpus.FormatText); err != nil {
		return err
	}
	r := c.Output("report")
	r.SetMeta("labeled", fmt.Sprint(rep.Labeled.Sentences))
	r.SetMeta("unlabeled", fmt.Sprint(rep.Unlabeled.Sentences))
	return r.WriteJSON(ReportFile, rep)
}

// pick returns the sentences of c at the indexes, with their tags or
// without. Document starts are dropped: sampled sentences no longer make
// documents.
func pick(c *corpus.Corpus, idx []int, tagged bool) *corpus.Corpus {
	out := &corpus.Corpus{Sentences: make([]corpus.Sentence, len(idx))}
	for k, i := range idx {
		s := corpus.Sentence{Tokens: c.Sentences[i].Tokens}
		if tagged {
			s.Tags = c.Sentences[i].Tags
		}
		out.Sentences[k] = s
	}
	return out
}

// partOf counts the sentences, tokens and, given a scheme, entities of c;
// Entities is nil when some sentence's tags are not in the scheme.
func partOf(c *corpus.Corpus, scheme *corpus.Scheme) Part {
	p := Part{Sentences: len(c.Sentences), Tokens: c.NumTokens()}
	if scheme == nil {
		return p
	}
	p.Entities = map[string]int{}
	for _, s := range c.Sentences {
		spans, err := scheme.Spans(s.Tags)
		if err != nil {
			p.Entities = nil
			return p
		}
		for _, sp := range spans {
			p.Entities[sp.Label]++
		}
	}
	return p
}

// clip is the start of a sentence, for errors.
func clip(tokens []string) string {
	if len(tokens) > 8 {
		return strings.Join(tokens[:8], " ") + " ..."
	}
	return strings.Join(tokens, " ")
}
