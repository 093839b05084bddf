package refine

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/stages"
)

// StageVote is the name of the voting stage in specs.
const StageVote = "refine.vote"

// What a rejected string becomes (param rejected).
const (
	RejectUnknown = "unknown" // of unknown type "?": the taggers leave it out of their loss
	RejectO       = "o"       // O: the taggers learn it as no entity
)

// reportedRejections bounds the rejected strings the report lists.
const reportedRejections = 50

func init() {
	stages.Register(stages.Stage{
		Name:    StageVote,
		Version: 2,
		Doc: "Weighs each labeled string of a distantly labeled corpus (its lower-cased words and its type) by the " +
			"predictions of taggers that never saw it (the folds of " + StageFolds + "): a string is kept where at least " +
			"`agreement` of its mentions are predicted with its span and type, and otherwise marked of unknown type " +
			"\"?\" (rejected unknown: left out of the taggers' loss, neither entity nor O) or made O. Strings of unknown " +
			"type already are kept as they are. With gold tags of the same sentences the report scores the labels " +
			"before and after, and the fold taggers' predictions.",
		Params: append(append([]stages.Param{
			stages.FloatParam("agreement", 0.5, "share of a string's mentions that the fold taggers must predict with its span and type for it to be kept", stages.Range(0, 1)),
			stages.StringParam("rejected", RejectUnknown, "what a rejected string becomes: unknown (type \"?\", left out of the loss; on two corpora it beat o by 2 to 2.2 F1, docs/accuracy.md) or o", stages.OneOf(RejectUnknown, RejectO)),
			stages.StringParam("scheme", "bio", "tag scheme of the refined corpus", stages.OneOf(schemes...)),
		}, dataset.SourceParams("corpus", "sentences with distant tags")...), dataset.SourceParams("gold", "gold tags of the corpus input's sentences")...),
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "sentences with distant tags: the labels weighed"},
			{Name: "predictions", Kind: "corpus", Many: true, Doc: "the held sentences of every fold, tagged by a tagger trained on that fold's train output (train.predict's tagged output); together they must hold every sentence of the corpus once"},
			{Name: "gold", Kind: "corpus", Optional: true, Doc: "the same sentences with gold tags: the report scores the labels before and after on them"},
		},
		Outputs: []stages.Port{
			{Name: "refined", Kind: "corpus", Doc: "refined.conll: the corpus with its rejected strings of unknown type, or O (meta labels=refined)"},
			{Name: "given", Kind: "corpus", Doc: "given.conll: the corpus with its labels as given, written as refined.conll is (meta labels=given): what " + StageChoose + " keeps in its place"},
			{Name: "report", Kind: "report", Doc: "report.json and report.txt: strings and mentions kept and rejected per type, the most mentioned rejected strings, and with gold the scores"},
		},
		Run: runVote,
	})
}

// StringVote is how the fold taggers judged one labeled string.
type StringVote struct {
	Surface  string `json:"surface"`
	Type     string `json:"type"`
	Mentions int    `json:"mentions"`
	Agreed   int    `json:"agreed"` // mentions predicted with the string's span and type
}

// TypeVote counts what the vote did to the strings of one type.
type TypeVote struct {
	Strings          int `json:"strings"`
	RejectedStrings  int `json:"rejected_strings"`
	Mentions         int `json:"mentions"`
	RejectedMentions int `json:"rejected_mentions"`
	// AgreedMentions are the mentions the fold taggers predicted with
	// their span and type, kept strings or not: against Mentions, how well
	// the taggers find a type in strings they never saw. Where they find
	// few of every string, a rejection says little of the labels, and the
	// choice on dev is what keeps the labels as given (BC5CDR's dictionary
	// labels: 1,290 of 1,457 strings rejected, "cocaine" and "seizures"
	// first among them).
	AgreedMentions int `json:"agreed_mentions"`
}

// VoteReport is the report of StageVote.
type VoteReport struct {
	Agreement float64              `json:"agreement"`
	Rejected  string               `json:"rejected"`
	Sentences int                  `json:"sentences"`
	Types     map[string]*TypeVote `json:"types"`
	// Rejections are the rejected strings, the most mentioned first (at
	// most 50).
	Rejections []StringVote `json:"rejections"`
	// With gold: the labels before and after (a string of unknown type
	// counts as O), and the fold taggers' predictions.
	Before      *eval.Report `json:"before,omitempty"`
	After       *eval.Report `json:"after,omitempty"`
	Predictions *eval.Report `json:"predictions,omitempty"`
}

// Total sums the counts of every type.
func (r VoteReport) Total() TypeVote {
	var total TypeVote
	for _, t := range r.Types {
		total.Strings += t.Strings
		total.RejectedStrings += t.RejectedStrings
		total.Mentions += t.Mentions
		total.RejectedMentions += t.RejectedMentions
		total.AgreedMentions += t.AgreedMentions
	}
	return total
}

// Align pairs the sentences of the fold taggers' predictions with those
// of the labeled corpus by their tokens, so that the folds may come in any
// order: it returns each labeled sentence's predicted spans. A predicted
// sentence the corpus lacks (or holds fewer times), or a labeled sentence
// no fold predicted, is an error naming it.
func Align(labeled *corpus.Corpus, predictions []*corpus.Corpus) ([][]corpus.Span, error) {
	waiting := map[string][]int{} // by tokens: the labeled sentences not yet paired, in order
	for i, s := range labeled.Sentences {
		k := strings.Join(s.Tokens, "\x00")
		waiting[k] = append(waiting[k], i)
	}
	out := make([][]corpus.Span, len(labeled.Sentences))
	paired := make([]bool, len(labeled.Sentences))
	unpaired := len(paired)
	for f, pc := range predictions {
		for j, s := range pc.Sentences {
			k := strings.Join(s.Tokens, "\x00")
			q := waiting[k]
			if len(q) == 0 {
				return nil, fmt.Errorf("predictions #%d, sentence %d (%.40q): not a sentence of the corpus, or predicted twice", f+1, j+1, strings.Join(s.Tokens, " "))
			}
			i := q[0]
			waiting[k] = q[1:]
			if s.Tags == nil {
				return nil, fmt.Errorf("predictions #%d, sentence %d: no tags", f+1, j+1)
			}
			sp, err := corpus.AnyScheme.Spans(s.Tags)
			if err != nil {
				return nil, fmt.Errorf("predictions #%d, sentence %d: %w", f+1, j+1, err)
			}
			out[i], paired[i] = sp, true
			unpaired--
		}
	}
	if unpaired > 0 {
		return nil, fmt.Errorf("sentence %d of the corpus (and %d more) has no prediction: the folds do not cover the corpus", slices.Index(paired, false)+1, unpaired-1)
	}
	return out, nil
}

type stringKey struct{ surface, typ string }

// Vote returns the labels with the strings the predictions disagree with
// rejected: a string (lower-cased words and type) is kept where at least
// agreement of its mentions are predicted with its span and type; a
// rejected mention becomes of unknown type (unknown) or O. Spans of
// unknown type are kept as they are, unweighed. labels and predicted hold
// each sentence's spans (Labeled, Align).
func Vote(c *corpus.Corpus, labels, predicted [][]corpus.Span, agreement float64, unknown bool) ([][]corpus.Span, VoteReport) {
	rep := VoteReport{Agreement: agreement, Rejected: RejectO, Sentences: len(c.Sentences), Types: map[string]*TypeVote{}}
	if unknown {
		rep.Rejected = RejectUnknown
	}
	votes := map[stringKey]*StringVote{}
	// Each mention's string, parallel to labels (nil for a span of
	// unknown type), so that the rewrite below reads the verdict back.
	voteOf := make([][]*StringVote, len(labels))
	for i, s := range c.Sentences {
		pred := map[corpus.Span]bool{}
		for _, e := range predicted[i] {
			pred[e] = true
		}
		voteOf[i] = make([]*StringVote, len(labels[i]))
		for j, e := range labels[i] {
			if e.Label == corpus.UnknownType {
				continue
			}
			k := stringKey{Surface(s.Tokens, e), e.Label}
			v := votes[k]
			if v == nil {
				v = &StringVote{Surface: k.surface, Type: k.typ}
				votes[k] = v
			}
			v.Mentions++
			if pred[e] {
				v.Agreed++
			}
			voteOf[i][j] = v
		}
	}
	kept := func(v *StringVote) bool { return float64(v.Agreed) >= agreement*float64(v.Mentions) }
	for _, v := range votes {
		t := rep.Types[v.Type]
		if t == nil {
			t = &TypeVote{}
			rep.Types[v.Type] = t
		}
		t.Strings++
		t.Mentions += v.Mentions
		t.AgreedMentions += v.Agreed
		if !kept(v) {
			t.RejectedStrings++
			t.RejectedMentions += v.Mentions
			rep.Rejections = append(rep.Rejections, *v)
		}
	}
	slices.SortFunc(rep.Rejections, func(a, b StringVote) int {
		return cmp.Or(cmp.Compare(b.Mentions, a.Mentions), cmp.Compare(a.Surface, b.Surface), cmp.Compare(a.Type, b.Type))
	})
	if len(rep.Rejections) > reportedRejections {
		rep.Rejections = rep.Rejections[:reportedRejections]
	}
	out := make([][]corpus.Span, len(labels))
	for i := range labels {
		for j, e := range labels[i] {
			if v := voteOf[i][j]; v != nil && !kept(v) {
				if !unknown {
					continue
				}
				e.Label = corpus.UnknownType
			}
			out[i] = append(out[i], e)
		}
	}
	return out, rep
}

// typed leaves out the spans of unknown type, which a score reads as O.
func typed(spans []corpus.Span) []corpus.Span {
	return slices.DeleteFunc(slices.Clone(spans), func(e corpus.Span) bool { return e.Label == corpus.UnknownType })
}

// score scores each sentence's spans against gold tags, in any scheme.
func score(gold *corpus.Corpus, spans [][]corpus.Span) (*eval.Report, error) {
	sc := eval.NewScorer(corpus.AnyScheme)
	for i, s := range gold.Sentences {
		pt, err := corpus.BIO.Tags(typed(spans[i]), len(s.Tokens))
		if err != nil {
			return nil, fmt.Errorf("sentence %d: %w", i+1, err)
		}
		if err := sc.Add(s.Tags, pt); err != nil {
			return nil, fmt.Errorf("sentence %d: %w", i+1, err)
		}
	}
	r := sc.Report()
	return &r, nil
}

// WriteText prints the report: strings and mentions rejected per type,
// with gold the scores, then the most mentioned rejected strings.
func (r VoteReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "label vote over %d sentences: a string is kept where the fold taggers agree with %g of its mentions; rejected strings made %s\n\n",
		r.Sentences, r.Agreement, r.Rejected)
	fmt.Fprintf(&b, "%-8s  %8s  %8s  %8s  %8s  %8s\n", "type", "strings", "rejected", "mentions", "rejected", "agreed%")
	row := func(name string, t TypeVote) {
		agreed := 0.0
		if t.Mentions > 0 {
			agreed = 100 * float64(t.AgreedMentions) / float64(t.Mentions)
		}
		fmt.Fprintf(&b, "%-8s  %8d  %8d  %8d  %8d  %8.1f\n", name, t.Strings, t.RejectedStrings, t.Mentions, t.RejectedMentions, agreed)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Types)) {
		row(name, *r.Types[name])
	}
	row("total", r.Total())
	if r.Before != nil {
		fmt.Fprintf(&b, "\nagainst gold            precision   recall       f1\n")
		for _, s := range []struct {
			name string
			rep  *eval.Report
		}{{"labels before", r.Before}, {"labels after", r.After}, {"fold predictions", r.Predictions}} {
			fmt.Fprintf(&b, "%-22s  %9.2f  %7.2f  %7.2f\n", s.name, 100*s.rep.Micro.Precision, 100*s.rep.Micro.Recall, 100*s.rep.Micro.F1)
		}
	}
	if len(r.Rejections) > 0 {
		fmt.Fprintf(&b, "\nrejected strings, the most mentioned first\n%-40s  %-6s  %8s  %6s\n", "string", "type", "mentions", "agreed")
		for _, v := range r.Rejections {
			fmt.Fprintf(&b, "%-40s  %-6s  %8d  %6d\n", v.Surface, v.Type, v.Mentions, v.Agreed)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func runVote(c *stages.Context) error {
	p := c.Params
	scheme, labeled, labels, err := readLabeled(c)
	if err != nil {
		return err
	}
	var preds []*corpus.Corpus
	for i, in := range c.Inputs("predictions") {
		pc, err := dataset.Source{}.ReadFrom(in, "predictions")
		if err != nil {
			return fmt.Errorf("predictions #%d: %w", i+1, err)
		}
		preds = append(preds, pc)
	}
	predicted, err := Align(labeled, preds)
	if err != nil {
		return stages.Permanent(fmt.Errorf("input predictions: %w", err))
	}
	refined, rep := Vote(labeled, labels, predicted, p.Float("agreement"), p.String("rejected") == RejectUnknown)
	if in := c.Input("gold"); in != nil {
		gold, err := dataset.ReadInput(in, p, "gold")
		if err != nil {
			return err
		}
		if err := scoreVote(&rep, gold, labeled, labels, refined, predicted); err != nil {
			return stages.Permanent(fmt.Errorf("input gold: %w", err))
		}
		c.Log.Info("labels refined", "f1_before", rep.Before.Micro.F1, "f1_after", rep.After.Micro.F1, "precision_before", rep.Before.Micro.Precision, "precision_after", rep.After.Micro.Precision)
	}
	total := rep.Total()
	c.Log.Info("strings voted", "strings", total.Strings, "rejected", total.RejectedStrings, "rejected_mentions", total.RejectedMentions, "agreed_mentions", total.AgreedMentions, "mentions", total.Mentions)
	if total.Strings > 0 && total.RejectedStrings == total.Strings {
		// No typed label left: a tagger cannot train on them, and the
		// vote says more of the fold taggers than of the labels.
		return stages.Permanent(fmt.Errorf("the fold taggers predicted none of the %d labeled strings in at least %g of its mentions: they learned too little from the folds' sentences (too few sentences or epochs) to weigh the labels; train on the labels as given (param refine: off)",
			total.Strings, p.Float("agreement")))
	}

	// Both sets of labels are written alike, so that the taggers that
	// weigh them on dev and the method's own taggers, which read the set
	// refine.choose passes on unchanged, read the same artifact.
	for _, set := range []struct {
		name  string
		spans [][]corpus.Span
	}{{LabelsRefined, refined}, {LabelsGiven, labels}} {
		out, err := subcorpus(labeled, set.spans, nil, scheme)
		if err != nil {
			return stages.Permanent(fmt.Errorf("input corpus: %w", err))
		}
		o := c.Output(set.name)
		o.SetMeta(dataset.MetaLabels, set.name)
		if err := dataset.WriteTagged(o, set.name, out, corpus.FormatCoNLL, scheme); err != nil {
			return err
		}
	}
	return dataset.WriteReport(c.Output("report"), rep)
}

// scoreVote sets the report's scores against gold tags of the corpus's
// sentences.
func scoreVote(rep *VoteReport, gold, labeled *corpus.Corpus, before, after, predicted [][]corpus.Span) error {
	if len(gold.Sentences) != len(labeled.Sentences) {
		return fmt.Errorf("%d sentences, but the corpus has %d", len(gold.Sentences), len(labeled.Sentences))
	}
	for i, s := range gold.Sentences {
		if len(s.Tokens) != len(labeled.Sentences[i].Tokens) || s.Tags == nil {
			return fmt.Errorf("sentence %d: %d tokens (tags: %v), but %d in the corpus", i+1, len(s.Tokens), s.Tags != nil, len(labeled.Sentences[i].Tokens))
		}
	}
	var err error
	if rep.Before, err = score(gold, before); err != nil {
		return err
	}
	if rep.After, err = score(gold, after); err != nil {
		return err
	}
	rep.Predictions, err = score(gold, predicted)
	return err
}
