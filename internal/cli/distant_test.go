package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/distant"
)

func TestDistantCommand(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		// One token per line, as AutoNER's raw_text.txt.
		"raw.txt": "lithium\ncarbonate\ntoxicity\nin\ntricuspid\nregurgitation\n.\n\nthe\nNALOXONE\neffect\n",
		"core.txt": "Chemical\tlithium carbonate\nDisease\ttoxicity\nChemical\tnaloxone\n" +
			"Disease\tnaloxone\nChemical\tthe\n",
		"full.txt":  "tricuspid regurgitation\n",
		"drugs.csv": "phrase,type\nnaloxone,Chemical\n",
		"stop.txt":  "the\nin\n",
		"gold.ck": "<s> O None\nlithium I Chemical\ncarbonate O Chemical\ntoxicity I Disease\nin I None\n" +
			"tricuspid I Disease\nregurgitation O Disease\n. I None\n<eof> I None\n\n",
	})
	path := func(name string) string { return filepath.Join(dir, name) }
	out, err := runCLI(t, "distant", "--log-level", "error",
		"--corpus", path("raw.txt"), "--corpus-format", "conll",
		"--gazetteer", path("core.txt"), "--gazetteer", path("full.txt"),
		"--gazetteer", path("drugs.csv")+",priority=1",
		"--stopwords", path("stop.txt"), "--case", "variants", "--scheme", "bioes",
		"--gold", path("gold.ck"), "--out", path("out.conll"), "--report", path("report.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"distant labels: 2 sentences, 10 tokens; scheme bioes, case variants",
		"drugs.csv (csv, priority 1): 1 entries (Chemical 1)",
		"Chemical            2\n",
		"(unknown)           1\n",
		"coverage: 40.00% of tokens typed, 20.00% of unknown type; 100.00% of sentences have a match",
		"micro avg     100.00    66.67    80.00        3          2        2",
		"1 sentences, 7 tokens, token accuracy 71.43% (scheme bio)",
		"unknown-type spans on the gold sentences: 1, of which 1 have exactly a gold entity's boundaries",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	labeled, err := corpus.ReadFile(path("out.conll"))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"B-Chemical", "E-Chemical", "S-Disease", "O", "B-?", "E-?", "O"},
		// "the" is a stopword; NALOXONE is a case variant of naloxone, whose
		// type drugs.csv's priority settles.
		{"O", "S-Chemical", "O"},
	}
	for i, s := range labeled.Sentences {
		if strings.Join(s.Tags, " ") != strings.Join(want[i], " ") {
			t.Errorf("sentence %d: tags %q, want %q", i+1, s.Tags, want[i])
		}
	}
	var r distant.Report
	b, err := os.ReadFile(path("report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Tokens != 10 || r.Gold == nil || r.Gold.Source != path("gold.ck") || r.Matcher.StopwordPhrases != 1 {
		t.Errorf("report %+v", r)
	}

	// Text output needs a labels file; with one it writes both.
	args := []string{"distant", "--log-level", "error", "--corpus", path("raw.txt"), "--corpus-format", "conll",
		"--gazetteer", path("core.txt"), "--out", path("out.txt")}
	if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "give --out-labels") {
		t.Errorf("text out without labels: %v", err)
	}
	if _, err := runCLI(t, append(args, "--out-labels", path("labels.txt"))...); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path("labels.txt")); err != nil || string(b) != "B-Chemical I-Chemical B-Disease O O O O\nB-Chemical O O\n" {
		t.Errorf("labels.txt = %q, %v", b, err)
	}
}

func TestDistantCommandErrors(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"raw.conll": "a\nb\n",
		"bad.txt":   "Chemical\ta\nno tab\n",
		"good.txt":  "Chemical\ta\n",
		"gold.txt":  "a b\n",
	})
	path := func(name string) string { return filepath.Join(dir, name) }
	base := []string{"distant", "--log-level", "error", "--corpus", path("raw.conll"), "--out", path("out.conll")}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--gazetteer", path("bad.txt")}, "bad.txt:2: no tab"},
		{[]string{"--gazetteer", path("good.txt") + ",priority=x"}, "priority"},
		{[]string{"--gazetteer", path("good.txt"), "--case", "upper"}, `unknown case mode "upper"`},
		{[]string{"--gazetteer", path("good.txt"), "--scheme", "xyz"}, "unknown tag scheme"},
		{[]string{"--gazetteer", path("good.txt"), "--gold", path("gold.txt")}, "sentence 1 has no tags"},
		{[]string{"--gazetteer", path("missing.txt")}, "missing.txt: no such file"},
	}
	for _, c := range cases {
		_, err := runCLI(t, append(base, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.args, err, c.want)
		}
	}
}

func TestLooksTokenPerLine(t *testing.T) {
	one := &corpus.Corpus{Sentences: []corpus.Sentence{{Tokens: []string{"a"}}, {Tokens: []string{"b"}}}}
	two := &corpus.Corpus{Sentences: []corpus.Sentence{{Tokens: []string{"a"}}, {Tokens: []string{"b", "c"}}}}
	if !looksTokenPerLine(one) || looksTokenPerLine(two) {
		t.Error("looksTokenPerLine")
	}
	if !isTextFormat("raw_text.txt", "") || isTextFormat("raw_text.txt", "conll") || isTextFormat("x.conll", "") {
		t.Error("isTextFormat")
	}
}

// --names labels the person names that a name list finds in the corpus, as
// the stage distant.names does; a first name the gazetteer types otherwise
// (Georgia) starts none.
func TestDistantCommandNames(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"raw.txt":   "Sen. Kennedy met Anna Weber in Georgia .\nGeorgia Brown stayed .\n",
		"gaz.tsv":   "LOC\tGeorgia\n",
		"names.tsv": "first\tAnna\nfirst\tGeorgia\ntitle\tSen.\n",
		"bad.tsv":   "surname\tWeber\n",
	})
	path := func(name string) string { return filepath.Join(dir, name) }
	args := []string{"distant", "--log-level", "error", "--corpus", path("raw.txt"), "--gazetteer", path("gaz.tsv"), "--out", path("out.conll")}
	if _, err := runCLI(t, append(args, "--names", path("names.tsv"))...); err != nil {
		t.Fatal(err)
	}
	labeled, err := corpus.ReadFile(path("out.conll"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(labeled.Sentences[0].Tags, " ") + " | " + strings.Join(labeled.Sentences[1].Tags, " ")
	if want := "O B-PER O B-PER I-PER O B-LOC O | B-LOC O O O"; got != want {
		t.Errorf("tags %q, want %q", got, want)
	}
	if _, err := runCLI(t, append(args, "--names", path("bad.tsv"))...); err == nil || !strings.Contains(err.Error(), "bad.tsv:1") {
		t.Errorf("a malformed name list: %v", err)
	}
}
