package subset

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/stages"
)

// StageNoise is the name of the label-noise stage in specs.
const StageNoise = "subset.noise"

func init() {
	stages.Register(stages.Stage{
		Name:    StageNoise,
		Version: 1,
		Doc: "Makes a corpus's entity tags worse in the way a dictionary matcher of low precision errs (knowledge-base " +
			"matching on open-domain text): each decision is drawn once per surface string, so that an error repeats " +
			"wherever the string occurs. A tagged entity is dropped, or given another type, or cut to its last token; a " +
			"capitalized word outside every entity becomes a one-word entity (a false match). With a gold input, false " +
			"matches avoid the gold entities and the report scores the tags before and after against gold. The defaults bring the distant labels of 1,100 CoNLL-2003 sentences (precision 80.6, recall 61.7) " +
			"to those that knowledge-base matching gives on Wikigold (47.9 / 47.6): 48.8 / 46.8 (docs/accuracy.md).",
		Params: append(append([]stages.Param{
			stages.FloatParam("drop", 0.04, "probability that an entity's string is unlabeled (every occurrence)", stages.Range(0, 1)),
			stages.FloatParam("retype", 0.17, "probability that an entity's string takes another type, drawn among the corpus's other types", stages.Range(0, 1)),
			stages.FloatParam("shrink", 0.1, "probability that a multi-word entity's string is labeled on its last word only", stages.Range(0, 1)),
			stages.FloatParam("false_match", 0.45, "probability that a capitalized word outside every entity is an entity (of a type drawn for the word): the matcher's false matches", stages.Range(0, 1)),
			stages.IntParam("seed", 1, "seed of the draws: the same seed makes the same errors", stages.AtLeast(0)),
			stages.StringParam("scheme", "bio", "tag scheme of the output corpus", stages.OneOf("io", "bio", "iob1", "bioes")),
			stages.StringParam("format", "conll", "format of the output corpus", stages.OneOf("conll", "jsonl", "jsonl-spans", "ck")),
		}, dataset.SourceParams("corpus", "sentences whose tags are made worse")...), dataset.SourceParams("gold", "gold tags of the corpus input's sentences")...),
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "sentences with tags (distant or gold)"},
			{Name: "gold", Kind: "corpus", Optional: true, Doc: "the same sentences with gold tags: false matches avoid their entities, and the report scores the tags on them"},
		},
		Outputs: []stages.Port{
			{Name: "noisy", Kind: "corpus", Doc: "the corpus with the worse tags"},
			{Name: "report", Kind: "report", Doc: "report.json and report.txt: what was changed per type, and with gold the tags' scores before and after"},
		},
		Run: runNoise,
	})
}

// NoiseRates are the probabilities of Noise's errors, each drawn once per
// surface string.
type NoiseRates struct {
	Drop       float64 `json:"drop"`
	Retype     float64 `json:"retype"`
	Shrink     float64 `json:"shrink"`
	FalseMatch float64 `json:"false_match"`
}

// NoiseReport counts what Noise changed, by the entity's type (a false
// match by the type it was given), and with gold scores the tags before and
// after.
type NoiseReport struct {
	Rates     NoiseRates             `json:"rates"`
	Seed      uint64                 `json:"seed"`
	Sentences int                    `json:"sentences"`
	Types     map[string]*NoiseCount `json:"types"`
	Before    *eval.Report           `json:"before,omitempty"`
	After     *eval.Report           `json:"after,omitempty"`
}

// NoiseCount is what Noise did to the entities of one type.
type NoiseCount struct {
	Entities     int `json:"entities"`
	Dropped      int `json:"dropped"`
	Retyped      int `json:"retyped"`
	Shrunk       int `json:"shrunk"`
	FalseMatches int `json:"false_matches"`
}

// Noise returns a copy of tagged whose entities are made worse, each
// decision drawn once per lower-cased surface string (for a false match,
// per word) from the seed: an entity is dropped with probability
// rates.Drop, else its type is changed with probability rates.Retype (to
// one of the corpus's other types), and a multi-word entity is cut to its
// last word with probability rates.Shrink. Then a capitalized alphabetic
// word outside every entity left (and, with gold, outside every gold
// entity) becomes a one-word entity with probability rates.FalseMatch, of
// a type drawn for the word. gold may be nil; otherwise it must have the
// same sentences and token counts, and the report scores tagged and the
// result against it.
func Noise(tagged, gold *corpus.Corpus, rates NoiseRates, seed uint64, scheme corpus.Scheme) (*corpus.Corpus, NoiseReport, error) {
	rep := NoiseReport{Rates: rates, Seed: seed, Sentences: len(tagged.Sentences), Types: map[string]*NoiseCount{}}
	if gold != nil && len(gold.Sentences) != len(tagged.Sentences) {
		return nil, rep, fmt.Errorf("%d sentences but %d gold ones", len(tagged.Sentences), len(gold.Sentences))
	}
	spans := make([][]corpus.Span, len(tagged.Sentences))
	typeSet := map[string]bool{}
	for i, s := range tagged.Sentences {
		if s.Tags == nil {
			return nil, rep, fmt.Errorf("sentence %d has no tags", i+1)
		}
		sp, err := corpus.AnyScheme.Spans(s.Tags)
		if err != nil {
			return nil, rep, fmt.Errorf("sentence %d: %w", i+1, err)
		}
		spans[i] = sp
		for _, e := range sp {
			typeSet[e.Label] = true
		}
	}
	types := slices.Sorted(maps.Keys(typeSet))
	// A retyped entity takes one of the other types: the lists are made
	// once, not per entity.
	others := make(map[string][]string, len(types))
	for _, t := range types {
		others[t] = slices.DeleteFunc(slices.Clone(types), func(u string) bool { return u == t })
	}
	count := func(typ string) *NoiseCount {
		if rep.Types[typ] == nil {
			rep.Types[typ] = &NoiseCount{}
		}
		return rep.Types[typ]
	}
	d := draws{seed: seed}
	// Without a type to give or a chance to draw, no word is hashed.
	falseMatches := len(types) > 0 && rates.FalseMatch > 0
	out := &corpus.Corpus{Sentences: make([]corpus.Sentence, len(tagged.Sentences))}
	var before, after *eval.Scorer
	if gold != nil {
		before, after = eval.NewScorer(corpus.AnyScheme), eval.NewScorer(corpus.AnyScheme)
	}
	for i, s := range tagged.Sentences {
		var goldTags []string
		if gold != nil {
			goldTags = gold.Sentences[i].Tags
			if len(goldTags) != len(s.Tokens) {
				return nil, rep, fmt.Errorf("sentence %d: %d tokens but %d gold tags", i+1, len(s.Tokens), len(goldTags))
			}
		}
		var kept []corpus.Span
		covered := make([]bool, len(s.Tokens))
		for _, e := range spans[i] {
			n := count(e.Label)
			n.Entities++
			str := strings.ToLower(strings.Join(s.Tokens[e.Start:e.End], " "))
			if d.draw("drop", str) < rates.Drop {
				n.Dropped++
				continue
			}
			if alt := others[e.Label]; len(alt) > 0 && d.draw("retype", str) < rates.Retype {
				e.Label = alt[d.pick("retype-to", str, len(alt))]
				n.Retyped++
			}
			if e.End-e.Start > 1 && d.draw("shrink", str) < rates.Shrink {
				e.Start = e.End - 1
				n.Shrunk++
			}
			kept = append(kept, e)
			for k := e.Start; k < e.End; k++ {
				covered[k] = true
			}
		}
		if goldTags != nil {
			goldSpans, err := corpus.AnyScheme.Spans(goldTags)
			if err != nil {
				return nil, rep, fmt.Errorf("gold sentence %d: %w", i+1, err)
			}
			for _, e := range goldSpans {
				for k := e.Start; k < e.End; k++ {
					covered[k] = true
				}
			}
		}
		for k, w := range s.Tokens {
			if !falseMatches || covered[k] || !capitalizedWord(w) {
				continue
			}
			word := strings.ToLower(w)
			if d.draw("false-match", word) < rates.FalseMatch {
				typ := types[d.pick("false-match-type", word, len(types))]
				kept = append(kept, corpus.Span{Start: k, End: k + 1, Label: typ})
				count(typ).FalseMatches++
			}
		}
		// Retyped entities and false matches may touch one of their type:
		// IO writes the two as one, as a matcher's IO output would.
		tags, err := scheme.Tags(kept, len(s.Tokens), corpus.MergeAdjacent())
		if err != nil {
			return nil, rep, fmt.Errorf("sentence %d: %w", i+1, err)
		}
		out.Sentences[i] = corpus.Sentence{Tokens: s.Tokens, Tags: tags, DocStart: s.DocStart}
		if goldTags != nil {
			if err := before.Add(goldTags, s.Tags); err != nil {
				return nil, rep, fmt.Errorf("sentence %d: %w", i+1, err)
			}
			if err := after.Add(goldTags, tags); err != nil {
				return nil, rep, fmt.Errorf("sentence %d: %w", i+1, err)
			}
		}
	}
	if gold != nil {
		b, a := before.Report(), after.Report()
		rep.Before, rep.After = &b, &a
	}
	return out, rep, nil
}

// draws are uniform numbers in [0, 1) keyed by (seed, decision, string):
// a hash rather than a generator's sequence, so that one string gets the
// same decision wherever it occurs, in any order of the sentences.
type draws struct{ seed uint64 }

func (d draws) draw(decision, s string) float64 {
	h := sha256.New()
	var seed [8]byte
	binary.BigEndian.PutUint64(seed[:], d.seed)
	h.Write(seed[:])
	io.WriteString(h, decision)
	h.Write([]byte{0})
	io.WriteString(h, s)
	return float64(binary.BigEndian.Uint64(h.Sum(nil)[:8])>>11) / (1 << 53)
}

// pick draws an index in [0, n).
func (d draws) pick(decision, s string, n int) int {
	return min(int(d.draw(decision, s)*float64(n)), n-1)
}

// capitalizedWord is a word of letters that starts upper-case: what a
// matcher of names takes for a name.
func capitalizedWord(w string) bool {
	r := []rune(w)
	if len(r) == 0 || !unicode.IsUpper(r[0]) {
		return false
	}
	return !slices.ContainsFunc(r, func(c rune) bool { return !unicode.IsLetter(c) })
}

// WriteText prints the report: the changes per type, then with gold the
// tags' micro scores before and after.
func (r NoiseReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "label noise over %d sentences (seed %d): drop %g, retype %g, shrink %g, false_match %g\n\n",
		r.Sentences, r.Seed, r.Rates.Drop, r.Rates.Retype, r.Rates.Shrink, r.Rates.FalseMatch)
	fmt.Fprintf(&b, "%-8s  %8s  %7s  %7s  %6s  %13s\n", "type", "entities", "dropped", "retyped", "shrunk", "false matches")
	var total NoiseCount
	row := func(name string, n NoiseCount) {
		fmt.Fprintf(&b, "%-8s  %8d  %7d  %7d  %6d  %13d\n", name, n.Entities, n.Dropped, n.Retyped, n.Shrunk, n.FalseMatches)
	}
	for _, t := range slices.Sorted(maps.Keys(r.Types)) {
		n := *r.Types[t]
		row(t, n)
		total.Entities += n.Entities
		total.Dropped += n.Dropped
		total.Retyped += n.Retyped
		total.Shrunk += n.Shrunk
		total.FalseMatches += n.FalseMatches
	}
	row("total", total)
	if r.Before != nil && r.After != nil {
		fmt.Fprintf(&b, "\nagainst gold    precision   recall       f1\n")
		for _, s := range []struct {
			name string
			rep  *eval.Report
		}{{"before", r.Before}, {"after", r.After}} {
			fmt.Fprintf(&b, "%-14s  %9.2f  %7.2f  %7.2f\n", s.name, 100*s.rep.Micro.Precision, 100*s.rep.Micro.Recall, 100*s.rep.Micro.F1)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func runNoise(c *stages.Context) error {
	p := c.Params
	scheme, err := corpus.ParseScheme(p.String("scheme"))
	if err != nil {
		return stages.Permanent(err)
	}
	tagged, err := dataset.ReadInput(c.Input("corpus"), p, "corpus")
	if err != nil {
		return err
	}
	var gold *corpus.Corpus
	if in := c.Input("gold"); in != nil {
		if gold, err = dataset.ReadInput(in, p, "gold"); err != nil {
			return err
		}
	}
	rates := NoiseRates{Drop: p.Float("drop"), Retype: p.Float("retype"), Shrink: p.Float("shrink"), FalseMatch: p.Float("false_match")}
	noisy, rep, err := Noise(tagged, gold, rates, uint64(p.Int("seed")), scheme)
	if err != nil {
		return stages.Permanent(fmt.Errorf("input corpus: %w", err))
	}
	if rep.After != nil {
		c.Log.Info("label noise", "precision_before", rep.Before.Micro.Precision, "recall_before", rep.Before.Micro.Recall,
			"precision_after", rep.After.Micro.Precision, "recall_after", rep.After.Micro.Recall)
	}

	if err := dataset.WriteTagged(c.Output("noisy"), "noisy", noisy, corpus.Format(p.String("format")), scheme); err != nil {
		return err
	}
	return dataset.WriteReport(c.Output("report"), rep)
}
