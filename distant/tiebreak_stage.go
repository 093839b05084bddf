package distant

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
)

// StageTieBreak is the name of the Tie-or-Break labeling stage.
const StageTieBreak = "distant.tiebreak"

// TieBreakFile is the file of the stage's labeled output.
const TieBreakFile = "tiebreak.ck"

func init() {
	stages.Register(stages.Stage{
		Name:    StageTieBreak,
		Version: 1,
		Doc: "AutoNER's Tie-or-Break labels (Shang et al., 2018): matches gazetteer phrases as " + StageName +
			" does and says of every two adjacent tokens whether they are tied in one matched phrase, broken " +
			"apart, or unknown (inside or next to a phrase of unknown type, or where overlapping matches disagree), " +
			"with each phrase's type set (\"?\" for untyped phrases); written as AutoNER's .ck with the S/D column.",
		Params: append(matchParams("phrases with tied types: unknown keeps the tied types as the phrase's type set, o labels them no phrase"),
			append([]stages.Param{abbreviationsParam()}, dataset.SourceParams("corpus", "sentences to label")...)...),
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "sentences to label"},
			{Name: "gazetteers", Kind: "gazetteer", Many: true, Doc: "typed or untyped phrase lists, JSONL or CSV; every file of every artifact is a gazetteer"},
			{Name: "stopwords", Kind: "stopwords", Optional: true, Doc: "one word per line; phrases made only of them are not matched"},
		},
		Outputs: []stages.Port{
			{Name: "labeled", Kind: "tiebreak", Doc: TieBreakFile + ": one token per line with its boundary (I or O), types and S or D (unknown boundary)"},
			{Name: "report", Kind: "report", Doc: "report.json and report.txt: ties, breaks, unknown gaps and phrases per type set"},
		},
		Run: runTieBreakStage,
	})
}

func runTieBreakStage(c *stages.Context) error {
	m, _, err := stageMatcher(c, nil, WithAbbreviations(c.Params.Bool("abbreviations")))
	if err != nil {
		return err
	}
	text, err := dataset.ReadInput(c.Input("corpus"), c.Params, "corpus")
	if err != nil {
		return err
	}
	c.Progress(0, int64(len(text.Sentences)), "labeling")
	labeled, report := m.TieBreak(text)
	c.Progress(int64(len(text.Sentences)), int64(len(text.Sentences)), "labeled")
	c.Log.Info("tie-or-break labels", "sentences", report.Sentences, "ties", report.Ties,
		"breaks", report.Breaks, "unknown", report.Unknown, "crossing", report.Crossing)

	w, err := c.Output("labeled").Create(TieBreakFile)
	if err != nil {
		return err
	}
	if err := WriteTieBreak(w, labeled); err != nil {
		w.Close()
		return stages.Permanent(fmt.Errorf("writing the tie-or-break labels: %w", err))
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := c.Output("report").WriteJSON("report.json", report); err != nil {
		return err
	}
	return c.Output("report").WriteFile("report.txt", report.text())
}

// text is the report for people.
func (r TieBreakReport) text() []byte {
	var b bytes.Buffer
	gaps := max(r.Ties+r.Breaks+r.Unknown, 1)
	fmt.Fprintf(&b, "tie-or-break labels: %d sentences, %d tokens\n", r.Sentences, r.Tokens)
	fmt.Fprintf(&b, "gaps: %d tie (%.1f%%), %d break (%.1f%%), %d unknown (%.1f%%; %d where overlapping matches disagree)\n",
		r.Ties, pct(r.Ties, gaps), r.Breaks, pct(r.Breaks, gaps), r.Unknown, pct(r.Unknown, gaps), r.Crossing)
	fmt.Fprintf(&b, "phrases of unknown type: %d\n", r.UnknownSegments)
	for _, k := range slices.Sorted(maps.Keys(r.Segments)) {
		fmt.Fprintf(&b, "phrases of type %s: %d\n", k, r.Segments[k])
	}
	return b.Bytes()
}

func pct(n, of int) float64 { return 100 * float64(n) / float64(of) }
