package eval

import (
	"fmt"
	"strconv"

	"github.com/nerflow/nerflow/stages"
)

// StageSelect is the stage that keeps, of several models, the one the dev
// split scores best.
const StageSelect = "eval.select"

// SelectionFile is the file of the selection's report.
const SelectionFile = "selection.json"

func init() {
	stages.Register(stages.Stage{
		Name:    StageSelect,
		Version: 1,
		Doc: "Keeps, of several models of one method (e.g. RoSTER's seeds and its student), the one whose dev " +
			"report scores the best entity micro F1, ties going to the later model: a later step that does not " +
			"beat the models it learned from on the dev split does not replace them.",
		Params: []stages.Param{
			stages.StringListParam("names", nil, "name of each candidate in the selection's report, in input order (empty: #1, #2, ...)"),
		},
		Inputs: []stages.Port{
			{Name: "models", Kind: "checkpoint", Many: true, Doc: "the candidate models"},
			{Name: "reports", Kind: "report", Many: true, Doc: "report.json of train.evaluate on the dev split, one per model in the same order"},
		},
		Outputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: "the chosen model, its files and metadata unchanged"},
			{Name: "report", Kind: "report", Doc: SelectionFile + ": every candidate's dev scores and which was chosen"},
		},
		Run: runSelect,
	})
}

// Candidate is one model of a selection with its dev score.
type Candidate struct {
	Name      string  `json:"name"`
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	F1        float64 `json:"f1"`
}

// Selection is the report of StageSelect.
type Selection struct {
	Candidates []Candidate `json:"candidates"`
	// Chosen is the index of the kept model in Candidates.
	Chosen int    `json:"chosen"`
	Name   string `json:"name"`
}

// Select returns the index of the candidate with the best F1; a later
// candidate wins a tie, because methods list their steps in order and a
// later step is the one the method meant to end with.
func Select(cands []Candidate) int {
	best := 0
	for i, c := range cands {
		if c.F1 >= cands[best].F1 {
			best = i
		}
	}
	return best
}

func runSelect(c *stages.Context) error {
	models, reports := c.Inputs("models"), c.Inputs("reports")
	names := c.Params.Strings("names")
	switch {
	case len(models) == 0:
		return stages.Permanent(fmt.Errorf("no models to select from"))
	case len(models) != len(reports):
		return stages.Permanent(fmt.Errorf("%d models but %d dev reports: want one report per model, in the models' order", len(models), len(reports)))
	case len(names) != 0 && len(names) != len(models):
		return stages.Permanent(fmt.Errorf("%d names for %d models", len(names), len(models)))
	}
	sel := Selection{Candidates: make([]Candidate, len(models))}
	for i, in := range reports {
		var r Report
		if err := in.ReadJSON("report.json", &r); err != nil {
			return fmt.Errorf("dev report #%d: %w", i+1, err)
		}
		name := "#" + strconv.Itoa(i+1)
		if len(names) != 0 {
			name = names[i]
		}
		sel.Candidates[i] = Candidate{Name: name, Precision: r.Micro.Precision, Recall: r.Micro.Recall, F1: r.Micro.F1}
	}
	sel.Chosen = Select(sel.Candidates)
	sel.Name = sel.Candidates[sel.Chosen].Name
	chosen := models[sel.Chosen]
	c.Log.Info("selected on dev", "model", sel.Name, "f1", sel.Candidates[sel.Chosen].F1, "candidates", len(models))

	out, err := c.PassOn("model", chosen)
	if err != nil {
		return fmt.Errorf("model %s: %w", sel.Name, err)
	}
	out.SetMeta("selected", sel.Name)
	rep := c.Output("report")
	rep.SetMeta("selected", sel.Name)
	return rep.WriteJSON(SelectionFile, sel)
}
