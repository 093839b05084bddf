package eval

import (
	"fmt"
	"io"
)

// WriteTable prints the report as a table of percentages: one row per
// entity type, then the micro average, then the token counts.
func (r Report) WriteTable(w io.Writer) error {
	names := r.TypeNames()
	width := len("micro avg")
	for _, n := range names {
		width = max(width, len(n))
	}
	ew := &errWriter{w: w}
	ew.printf("%-*s  %9s  %7s  %7s  %7s  %9s  %7s\n", width, "type", "precision", "recall", "f1", "support", "predicted", "correct")
	row := func(name string, s Score) {
		ew.printf("%-*s  %9.2f  %7.2f  %7.2f  %7d  %9d  %7d\n", width, name, 100*s.Precision, 100*s.Recall, 100*s.F1, s.Support, s.Predicted, s.Correct)
	}
	for _, n := range names {
		row(n, r.Types[n])
	}
	row("micro avg", r.Micro)
	ew.printf("\n%d sentences, %d tokens, token accuracy %.2f%% (scheme %s)\n", r.Sentences, r.Tokens, 100*r.TokenAccuracy, r.Scheme)
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// WriteComparison prints the report's precision, recall and F1 beside a
// baseline's on the same gold sentences (the distant labels a model was
// trained on, say), type by type and micro averaged, with the difference
// in F1 points: the gain a model adds over what produced its training data.
func (r Report) WriteComparison(w io.Writer, baseline Report, name string) error {
	names := r.TypeNames()
	for _, n := range baseline.TypeNames() {
		if _, ok := r.Types[n]; !ok {
			names = append(names, n)
		}
	}
	width := len("micro avg")
	for _, n := range names {
		width = max(width, len(n))
	}
	ew := &errWriter{w: w}
	ew.printf("%-*s  %23s  %23s  %7s\n", width, "", "model", name, "")
	ew.printf("%-*s  %7s %7s %7s  %7s %7s %7s  %7s\n", width, "type", "P", "R", "F1", "P", "R", "F1", "F1 gain")
	row := func(n string, m, b Score) {
		ew.printf("%-*s  %7.2f %7.2f %7.2f  %7.2f %7.2f %7.2f  %+7.2f\n", width, n, 100*m.Precision, 100*m.Recall, 100*m.F1,
			100*b.Precision, 100*b.Recall, 100*b.F1, 100*(m.F1-b.F1))
	}
	for _, n := range names {
		row(n, r.Types[n], baseline.Types[n])
	}
	row("micro avg", r.Micro, baseline.Micro)
	return ew.err
}
