package subset

import (
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
)

// StageMask is the name of the masking stage in specs.
const StageMask = "subset.mask"

func init() {
	stages.Register(stages.Stage{
		Name:    StageMask,
		Version: 1,
		Doc: "Drops each gold entity of a corpus with probability p (seeded): its tokens become O, the rest of the " +
			"sentence is untouched. Simulates missing annotations (a partially annotated corpus) from a gold one; " +
			"the report counts the entities kept and dropped per type.",
		Params: append([]stages.Param{
			stages.FloatParam("p", 0.5, "probability that a gold entity is dropped", stages.Range(0, 1)),
			stages.IntParam("seed", 1, "seed of the draws: the same seed drops the same entities", stages.AtLeast(0)),
			stages.StringParam("scheme", "bio", "tag scheme of the masked corpus", stages.OneOf("io", "bio", "iob1", "bioes")),
			stages.StringParam("format", "conll", "format of the masked corpus", stages.OneOf("conll", "jsonl", "jsonl-spans", "ck")),
		}, dataset.SourceParams("corpus", "gold sentences")...),
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "sentences with gold tags"},
		},
		Outputs: []stages.Port{
			{Name: "masked", Kind: "corpus", Doc: "the corpus with the dropped entities tagged O"},
			{Name: "report", Kind: "report", Doc: "report.json and report.txt: entities kept and dropped per type"},
		},
		Run: runMask,
	})
}

// MaskReport counts what Mask kept and dropped.
type MaskReport struct {
	P         float64 `json:"p"`
	Seed      uint64  `json:"seed"`
	Sentences int     `json:"sentences"`
	Kept      int     `json:"kept"`
	Dropped   int     `json:"dropped"`
	// Types counts the entities of each type.
	Types map[string]*MaskCount `json:"types"`
}

// MaskCount is the number of entities of one type kept and dropped.
type MaskCount struct {
	Kept    int `json:"kept"`
	Dropped int `json:"dropped"`
}

// Mask returns a copy of gold in which each entity is dropped with
// probability p: one uniform draw in [0, 1) per entity, in corpus order
// (sentence by sentence, entities left to right), from a PCG generator
// seeded with seed; the entity is dropped when its draw is below p. The
// kept entities are written back in scheme (which must be writable: io,
// bio, iob1 or bioes), so the tags around a dropped entity stay well formed
// (an IOB1 B- tag that only separated it from its neighbour becomes I-).
// Every sentence must have tags; the error names the first that has none.
func Mask(gold *corpus.Corpus, p float64, seed uint64, scheme corpus.Scheme) (*corpus.Corpus, MaskReport, error) {
	rep := MaskReport{P: p, Seed: seed, Sentences: len(gold.Sentences), Types: map[string]*MaskCount{}}
	if p < 0 || p > 1 {
		return nil, rep, fmt.Errorf("mask probability %g is not in [0, 1]", p)
	}
	rng := rand.New(rand.NewPCG(seed, maskStream))
	out := &corpus.Corpus{Sentences: make([]corpus.Sentence, len(gold.Sentences))}
	for i, s := range gold.Sentences {
		if s.Tags == nil {
			return nil, rep, fmt.Errorf("sentence %d has no tags: masking needs a labeled corpus", i+1)
		}
		spans, err := corpus.AnyScheme.Spans(s.Tags)
		if err != nil {
			return nil, rep, fmt.Errorf("sentence %d: %w", i+1, err)
		}
		kept := spans[:0:0]
		for _, sp := range spans {
			n := rep.Types[sp.Label]
			if n == nil {
				n = &MaskCount{}
				rep.Types[sp.Label] = n
			}
			if rng.Float64() < p {
				n.Dropped++
				rep.Dropped++
				continue
			}
			n.Kept++
			rep.Kept++
			kept = append(kept, sp)
		}
		// Adjacent entities of one type were already one in an IO input;
		// dropping entities never creates new adjacency.
		tags, err := scheme.Tags(kept, len(s.Tokens), corpus.MergeAdjacent())
		if err != nil {
			return nil, rep, fmt.Errorf("sentence %d: %w", i+1, err)
		}
		out.Sentences[i] = corpus.Sentence{Tokens: s.Tokens, Tags: tags, DocStart: s.DocStart}
	}
	return out, rep, nil
}

// maskStream is the PCG stream of Mask's draws, fixed so that a seed means
// the same draws in every release.
const maskStream = 0x6d61736b // "mask"

// WriteText prints the report as a table: one row per type, then the total.
func (r MaskReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "entities dropped with p = %g (seed %d) over %d sentences\n\n", r.P, r.Seed, r.Sentences)
	fmt.Fprintf(&b, "%-8s  %7s  %7s  %7s\n", "type", "kept", "dropped", "dropped%")
	row := func(name string, kept, dropped int) {
		share := 0.0
		if kept+dropped > 0 {
			share = 100 * float64(dropped) / float64(kept+dropped)
		}
		fmt.Fprintf(&b, "%-8s  %7d  %7d  %7.2f\n", name, kept, dropped, share)
	}
	for _, t := range slices.Sorted(maps.Keys(r.Types)) {
		row(t, r.Types[t].Kept, r.Types[t].Dropped)
	}
	row("total", r.Kept, r.Dropped)
	_, err := io.WriteString(w, b.String())
	return err
}

func runMask(c *stages.Context) error {
	p := c.Params
	scheme, err := corpus.ParseScheme(p.String("scheme"))
	if err != nil {
		return stages.Permanent(err)
	}
	gold, err := dataset.ReadInput(c.Input("corpus"), p, "corpus")
	if err != nil {
		return err
	}
	masked, rep, err := Mask(gold, p.Float("p"), uint64(p.Int("seed")), scheme)
	if err != nil {
		return stages.Permanent(fmt.Errorf("input corpus: %w", err))
	}
	c.Log.Info("masked gold entities", "p", rep.P, "kept", rep.Kept, "dropped", rep.Dropped)

	if err := dataset.WriteTagged(c.Output("masked"), "masked", masked, corpus.Format(p.String("format")), scheme); err != nil {
		return err
	}
	return dataset.WriteReport(c.Output("report"), rep)
}
