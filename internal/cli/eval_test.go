package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/eval"
)

// runCLI runs the nerflow command line with args and returns its output.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestEvalCommand(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"gold.txt": "B-PER I-PER O B-LOC\nB-ORG I-ORG I-ORG O\n",
		"pred.txt": "B-PER I-PER O B-ORG\nB-ORG I-ORG O O\n",
		// The same predictions as a CoNLL file with tokens.
		"pred.conll": "-DOCSTART- O\n\nAnn B-PER\nLee I-PER\nin O\nRome B-ORG\n\nNew B-ORG\nYork I-ORG\nTimes O\nsaid O\n",
	})
	gold, pred := filepath.Join(dir, "gold.txt"), filepath.Join(dir, "pred.txt")
	jsonPath := filepath.Join(dir, "report.json")
	out, err := runCLI(t, "eval", "--gold", gold, "--pred", pred, "--json", jsonPath, "--log-level", "error")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"PER           100.00   100.00   100.00        1          1        1\n",
		"micro avg      33.33    33.33    33.33        3          3        1\n",
		"2 sentences, 8 tokens, token accuracy 75.00% (scheme bio)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var r eval.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Micro.Correct != 1 || r.Micro.Support != 3 || r.Types["ORG"].Predicted != 2 || r.Tokens != 8 {
		t.Errorf("JSON report %+v", r)
	}

	out2, err := runCLI(t, "eval", "--gold", gold, "--pred", filepath.Join(dir, "pred.conll"))
	if err != nil || out2 != out {
		t.Errorf("labels vs CoNLL predictions differ (%v):\n%s\n%s", err, out2, out)
	}

	self, err := runCLI(t, "eval", "--gold", gold, "--pred", gold)
	if err != nil || !strings.Contains(self, "micro avg     100.00   100.00   100.00        3          3        3") {
		t.Errorf("gold against itself (%v):\n%s", err, self)
	}
}

func TestEvalCommandErrors(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"gold.txt":    "B-PER I-PER O\nO B-LOC\n",
		"short.txt":   "B-PER I-PER O\n",
		"long.txt":    "B-PER I-PER O\nO B-LOC\nO\n",
		"count.txt":   "B-PER I-PER O\nO B-LOC O\n",
		"bioes.txt":   "B-PER E-PER O\nO S-LOC\n",
		"empty.txt":   "",
		"a.conll":     "x B-PER\ny I-PER\nz O\n\nu O\nv B-LOC\n",
		"b.conll":     "x B-PER\ny I-PER\nz O\n\nu O\nw B-LOC\n",
		"text.conll":  "x\ny\nz\n\nu\nv\n",
		"gold.xml":    "<x/>",
		"badutf8.txt": "B-PER I-PER O\nO \xffB-LOC\n",
	})
	p := func(name string) string { return filepath.Join(dir, name) }
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--pred", p("short.txt")}, `required flag(s) "gold" not set`},
		{[]string{"--gold", p("gold.txt"), "--pred", p("short.txt")}, p("short.txt") + ": ends after 1 sentences, but " + p("gold.txt") + ":2 holds sentence 2"},
		{[]string{"--gold", p("gold.txt"), "--pred", p("long.txt")}, p("gold.txt") + ": ends after 2 sentences, but " + p("long.txt") + ":3 holds sentence 3"},
		{[]string{"--gold", p("gold.txt"), "--pred", p("count.txt")}, p("count.txt") + ":2: sentence 2 has 3 tags but " + p("gold.txt") + ":2 has 2"},
		{[]string{"--gold", p("gold.txt"), "--pred", p("bioes.txt")}, p("bioes.txt") + `:1: label 2: unknown tag "E-PER": the bio scheme has no E- prefix`},
		{[]string{"--gold", p("gold.txt"), "--pred", p("bioes.txt"), "--types", "PER"}, p("bioes.txt") + `:1: label 2: unknown tag "E-PER"`},
		{[]string{"--gold", p("gold.txt"), "--pred", p("gold.txt"), "--types", "PER"}, p("gold.txt") + `:2: label 2: unknown tag "B-LOC": entity type "LOC" is not one of PER`},
		{[]string{"--gold", p("empty.txt"), "--pred", p("gold.txt")}, p("empty.txt") + ": empty file: no sentences"},
		{[]string{"--gold", p("a.conll"), "--pred", p("b.conll")}, p("b.conll") + `:5: sentence 2 token 2 is "w" but ` + p("a.conll") + `:5 has "v": the files are not aligned`},
		{[]string{"--gold", p("text.conll"), "--pred", p("a.conll")}, p("text.conll") + ":1: sentence 1 has no tags"},
		{[]string{"--gold", p("gold.xml"), "--pred", p("a.conll")}, "cannot tell the corpus format"},
		{[]string{"--gold", p("gold.txt"), "--pred", p("a.conll"), "--format", "ck"}, p("gold.txt") + `:1: boundary "I-PER": want I (break) or O (tie)`},
		{[]string{"--gold", p("gold.txt"), "--pred", p("gold.txt"), "--scheme", "bilou"}, `unknown tag scheme "bilou"`},
		{[]string{"--gold", p("gold.txt"), "--pred", p("badutf8.txt")}, p("badutf8.txt") + ":2: invalid UTF-8 at byte 3 of the line"},
		{[]string{"--gold", p("missing.txt"), "--pred", p("gold.txt")}, "no such file"},
	}
	for _, c := range cases {
		_, err := runCLI(t, append([]string{"eval"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("eval %q: %v; want %q", c.args, err, c.want)
		}
	}
}
