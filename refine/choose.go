package refine

import (
	"fmt"
	"io"
	"strings"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/stages"
)

// StageChoose is the name of the stage that keeps the refined labels or
// the given ones.
const StageChoose = "refine.choose"

func init() {
	stages.Register(stages.Stage{
		Name:    StageChoose,
		Version: 2,
		Doc: "Keeps the refined labels (" + StageVote + ") or the labels as given, whichever trained the tagger that " +
			"scores better on the dev split (train.evaluate's reports of two taggers trained alike, one on each); a tie " +
			"keeps the labels as given. Refinement pays on labels of low precision and costs on labels of high " +
			"precision, and which a corpus has shows on dev.",
		Inputs: []stages.Port{
			{Name: "given", Kind: "corpus", Doc: "the labels as given (" + StageVote + "'s given output)"},
			{Name: "refined", Kind: "corpus", Doc: "the refined labels (" + StageVote + "'s refined output)"},
			{Name: "given_report", Kind: "report", Doc: "report.json of train.evaluate on the dev split: the tagger trained on the labels as given"},
			{Name: "refined_report", Kind: "report", Doc: "report.json of train.evaluate on the dev split: the tagger trained alike on the refined labels"},
		},
		Outputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "the input kept, unchanged (given.conll or refined.conll; meta labels names it): the method's taggers that train as the kept labels' check tagger did are its cache hits"},
			{Name: "report", Kind: "report", Doc: "report.json and report.txt: both taggers' dev scores and which labels were kept"},
		},
		Run: runChoose,
	})
}

// The two sets of labels, as StageVote's outputs and StageChoose's inputs
// are named and as meta dataset.MetaLabels of their artifacts says.
const (
	LabelsGiven   = "given"
	LabelsRefined = "refined"
)

// Choice is the report of StageChoose.
type Choice struct {
	Given   eval.Candidate `json:"given"`
	Refined eval.Candidate `json:"refined"`
	Kept    string         `json:"kept"` // LabelsGiven or LabelsRefined
}

// Choose keeps the refined labels where their tagger scored a higher dev
// F1 than the given labels' tagger: refinement must earn its place, so a
// tie keeps the labels as given.
func Choose(given, refined eval.Candidate) Choice {
	ch := Choice{Given: given, Refined: refined, Kept: LabelsGiven}
	if refined.F1 > given.F1 {
		ch.Kept = LabelsRefined
	}
	return ch
}

// WriteText prints both taggers' dev scores and the labels kept.
func (ch Choice) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "dev scores of a tagger trained on each     precision   recall       f1\n")
	for _, c := range []eval.Candidate{ch.Given, ch.Refined} {
		fmt.Fprintf(&b, "%-40s  %9.2f  %7.2f  %7.2f\n", c.Name+" labels", 100*c.Precision, 100*c.Recall, 100*c.F1)
	}
	fmt.Fprintf(&b, "\nkept: the %s labels\n", ch.Kept)
	_, err := io.WriteString(w, b.String())
	return err
}

func runChoose(c *stages.Context) error {
	var cands [2]eval.Candidate
	for i, name := range []string{LabelsGiven, LabelsRefined} {
		var r eval.Report
		if err := c.Input(name+"_report").ReadJSON("report.json", &r); err != nil {
			return fmt.Errorf("input %s_report: %w", name, err)
		}
		cands[i] = eval.Candidate{Name: name, Precision: r.Micro.Precision, Recall: r.Micro.Recall, F1: r.Micro.F1}
	}
	ch := Choose(cands[0], cands[1])
	c.Log.Info("labels chosen on dev", "kept", ch.Kept, "f1_given", ch.Given.F1, "f1_refined", ch.Refined.F1)
	// The kept labels pass on byte for byte: the check tagger trained on
	// them is then, for the engine, the method's tagger of the same recipe
	// and seed (roster's first seed, autoner's fuzzy tagger at miss_rate
	// 0.5), which is trained once.
	kept := c.Input(ch.Kept)
	if got := kept.Meta[dataset.MetaLabels]; got != ch.Kept {
		return stages.Permanent(fmt.Errorf("input %s: meta %s=%q, want %q: connect %s's outputs of that name", ch.Kept, dataset.MetaLabels, got, ch.Kept, StageVote))
	}
	if _, err := c.PassOn("corpus", kept); err != nil {
		return fmt.Errorf("input %s: %w", ch.Kept, err)
	}
	r := c.Output("report")
	r.SetMeta("kept", ch.Kept)
	return dataset.WriteReport(r, ch)
}
