package eval

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/nerflow/nerflow/stages"
)

// StageTable is the stage that gathers evaluation reports into one table.
const StageTable = "eval.table"

func init() {
	stages.Register(stages.Stage{
		Name:    StageTable,
		Version: 1,
		Doc: "Gathers the evaluation reports of an experiment (a fan-in of train.evaluate over one or two fanned-out " +
			"keys) into one table of entity micro F1, with the missampling rate of each training when its report is given.",
		Params: []stages.Param{
			stages.StringParam("title", "", "heading of the table"),
			stages.StringParam("row_key", "", "what the rows vary (e.g. p)"),
			stages.StringListParam("rows", nil, "label of each row, in fan-in order (empty: one row per report, numbered)"),
			stages.StringParam("column_key", "", "what the columns vary (e.g. sampling)"),
			stages.StringListParam("columns", nil, "label of each column (empty: one column); the reports come row by row, all columns of a row together (the first fanned-out key varying slowest)"),
		},
		Inputs: []stages.Port{
			{Name: "reports", Kind: "report", Many: true, Doc: "report.json of train.evaluate, one per cell"},
			{Name: "training", Kind: "report", Many: true, Optional: true, Doc: "report.json of train.tagger, one per cell in the same order: adds the last epoch's missampling rate"},
		},
		Outputs: []stages.Port{
			{Name: "table", Kind: "report", Doc: "table.json (the cells) and table.md (a Markdown table)"},
		},
		Run: runTable,
	})
}

// Cell is one evaluated run of a table.
type Cell struct {
	Row       string  `json:"row"`
	Column    string  `json:"column,omitempty"`
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	F1        float64 `json:"f1"`
	// Missampling is the last training epoch's missampling rate, when the
	// training report has one.
	Missampling *float64 `json:"missampling,omitempty"`
}

// Table is the output of StageTable.
type Table struct {
	Title     string   `json:"title,omitempty"`
	RowKey    string   `json:"row_key,omitempty"`
	ColumnKey string   `json:"column_key,omitempty"`
	Rows      []string `json:"rows"`
	Columns   []string `json:"columns,omitempty"`
	Cells     []Cell   `json:"cells"`
}

// trainingReport is the part of train.tagger's report.json the table reads.
type trainingReport struct {
	Result struct {
		Epochs []struct {
			Missampling *float64 `json:"missampling"`
		} `json:"epochs"`
	} `json:"result"`
}

func runTable(c *stages.Context) error {
	p := c.Params
	reports, training := c.Inputs("reports"), c.Inputs("training")
	t := Table{Title: p.String("title"), RowKey: p.String("row_key"), ColumnKey: p.String("column_key"), Rows: p.Strings("rows"), Columns: p.Strings("columns")}
	cols := max(1, len(t.Columns))
	if len(t.Rows) == 0 {
		for i := range len(reports) / cols {
			t.Rows = append(t.Rows, fmt.Sprint(i+1))
		}
	}
	if len(reports) != len(t.Rows)*cols || len(reports) == 0 {
		return stages.Permanent(fmt.Errorf("%d reports for %d rows x %d columns", len(reports), len(t.Rows), cols))
	}
	if len(training) > 0 && len(training) != len(reports) {
		return stages.Permanent(fmt.Errorf("%d training reports for %d evaluation reports", len(training), len(reports)))
	}
	for i, in := range reports {
		var r Report
		if err := in.ReadJSON("report.json", &r); err != nil {
			return stages.Permanent(fmt.Errorf("reports #%d: %w", i+1, err))
		}
		cell := Cell{Row: t.Rows[i/cols], Precision: r.Micro.Precision, Recall: r.Micro.Recall, F1: r.Micro.F1}
		if len(t.Columns) > 0 {
			cell.Column = t.Columns[i%cols]
		}
		if len(training) > 0 {
			var tr trainingReport
			if err := training[i].ReadJSON("report.json", &tr); err != nil {
				return stages.Permanent(fmt.Errorf("training #%d: %w", i+1, err))
			}
			if n := len(tr.Result.Epochs); n > 0 {
				cell.Missampling = tr.Result.Epochs[n-1].Missampling
			}
		}
		t.Cells = append(t.Cells, cell)
	}
	out := c.Output("table")
	if err := out.WriteJSON("table.json", t); err != nil {
		return err
	}
	return out.WriteFile("table.md", []byte(t.Markdown()))
}

// Markdown renders the table: with columns, one F1 per cell (and the
// missampling rate in parentheses, when known); without, precision, recall
// and F1 per row. Scores are percentages.
func (t Table) Markdown() string {
	var b strings.Builder
	if t.Title != "" {
		fmt.Fprintf(&b, "### %s\n\n", t.Title)
	}
	pct := func(x float64) string { return fmt.Sprintf("%.2f", 100*x) }
	miss := func(c Cell) string {
		if c.Missampling == nil {
			return ""
		}
		return " (" + pct(*c.Missampling) + ")"
	}
	rowKey := cmp.Or(t.RowKey, "run")
	if len(t.Columns) == 0 {
		fmt.Fprintf(&b, "| %s | precision | recall | F1 |\n|---|---:|---:|---:|\n", rowKey)
		for _, c := range t.Cells {
			fmt.Fprintf(&b, "| %s | %s | %s | %s%s |\n", c.Row, pct(c.Precision), pct(c.Recall), pct(c.F1), miss(c))
		}
	} else {
		head := rowKey
		if t.ColumnKey != "" {
			head += " \\ " + t.ColumnKey
		}
		fmt.Fprintf(&b, "| %s | %s |\n|---%s|\n", head, strings.Join(t.Columns, " | "), strings.Repeat("|---:", len(t.Columns)))
		for r, row := range t.Rows {
			cells := make([]string, len(t.Columns))
			for k := range t.Columns {
				c := t.Cells[r*len(t.Columns)+k]
				cells[k] = pct(c.F1) + miss(c)
			}
			fmt.Fprintf(&b, "| %s | %s |\n", row, strings.Join(cells, " | "))
		}
	}
	if t.hasMissampling() {
		b.WriteString("\nEntity micro F1 in %; in parentheses, the last epoch's missampling rate in % (share of the drawn negatives that are entities of the complete annotation).\n")
	} else {
		b.WriteString("\nEntity micro F1 in %.\n")
	}
	return b.String()
}

func (t Table) hasMissampling() bool {
	for _, c := range t.Cells {
		if c.Missampling != nil {
			return true
		}
	}
	return false
}
