package distant

import (
	"reflect"
	"strings"
	"testing"
)

func TestLoadTyped(t *testing.T) {
	g, err := Load(Source{Path: "testdata/core.txt", Priority: 3})
	if err != nil {
		t.Fatal(err)
	}
	rep := g.Report
	if rep.Format != FormatTyped || g.Priority != 3 || rep.Priority != 3 {
		t.Errorf("format %q priority %d", rep.Format, g.Priority)
	}
	// 10 lines: 1 duplicate (line 6), 1 blank phrase (7), 1 conflict that is
	// kept (8), 1 zero-width space that tokenizes to nothing (9).
	if rep.Entries != 7 || len(g.Entries) != 7 {
		t.Errorf("entries = %d, want 7", rep.Entries)
	}
	want := map[string]int{"Chemical": 3, "Disease": 4}
	if !reflect.DeepEqual(rep.Types, want) {
		t.Errorf("types = %v, want %v", rep.Types, want)
	}
	check := func(name string, is Issues, lines ...int) {
		t.Helper()
		var got []int
		for _, e := range is.Examples {
			got = append(got, e.Line)
		}
		if is.Count != len(lines) || !reflect.DeepEqual(got, lines) {
			t.Errorf("%s: count %d lines %v, want %v", name, is.Count, got, lines)
		}
	}
	check("duplicates", rep.Duplicates, 6)
	check("empty", rep.Empty, 7)
	check("conflicts", rep.Conflicts, 8)
	check("no tokens", rep.NoTokens, 9)
	if d := rep.Conflicts.Examples[0].Detail; d != "Chemical vs Disease" {
		t.Errorf("conflict detail %q", d)
	}
	e := g.Entries[1]
	if e.Phrase != "lithium carbonate" || e.Type != "Chemical" || e.Line != 2 || !reflect.DeepEqual(e.Tokens, []string{"lithium", "carbonate"}) {
		t.Errorf("entry = %+v", e)
	}
}

func TestLoadUntypedWithDefaultType(t *testing.T) {
	g, err := Load(Source{Path: "testdata/full.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Report.Format != FormatUntyped || g.Report.Types[""] != 4 {
		t.Errorf("report = %+v", g.Report)
	}
	g, err = Load(Source{Path: "testdata/full.txt", Type: "Thing"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Report.Types["Thing"] != 4 || g.Entries[0].Type != "Thing" {
		t.Errorf("type override: %+v", g.Report.Types)
	}
}

// The JSONL and CSV fixtures hold the same gazetteer.
func TestLoadJSONLAndCSV(t *testing.T) {
	want := []Entry{
		{Phrase: "naloxone", Tokens: []string{"naloxone"}, Type: "Chemical"},
		{Phrase: "Narcan", Tokens: []string{"Narcan"}, Type: "Chemical"},
		{Phrase: "naloxone hydrochloride", Tokens: []string{"naloxone", "hydrochloride"}, Type: "Chemical"},
		{Phrase: "hypertension", Tokens: []string{"hypertension"}, Type: "Disease"},
		{Phrase: "blood pressure", Tokens: []string{"blood", "pressure"}},
	}
	for path, lines := range map[string][]int{
		"testdata/gaz.jsonl": {1, 1, 1, 3, 4},
		"testdata/gaz.csv":   {2, 2, 2, 3, 4},
	} {
		g, err := Load(Source{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			want[i].Line = lines[i]
		}
		if !reflect.DeepEqual(g.Entries, want) {
			t.Errorf("%s: entries\n%+v\nwant\n%+v", path, g.Entries, want)
		}
	}
}

func TestLoadErrorsNameFileAndLine(t *testing.T) {
	cases := []struct {
		path, format, content, want string
	}{
		{"a.txt", "", "Chemical\tx\nno tab here\n", "a.txt:2: no tab"},
		{"a.txt", "", "Chemical\tx\n\tempty type\n", `a.txt:2: empty type in ""`},
		{"a.txt", "", "Chemical\tx\tmore\n", "a.txt:1: more than one tab"},
		{"b.txt", "", "x\ny\nChemical\tz\n", "b.txt:3: tab in a list of untyped phrases"},
		{"c.jsonl", "", "{\"phrase\": \"x\"}\n{\"phrase\": \"y\"\n", "c.jsonl:2: unexpected end of JSON input"},
		{"c.jsonl", "", "{\"phrse\": \"x\"}\n", `c.jsonl:1: no "phrase" key`},
		{"c.jsonl", "", "{\"phrase\": 3}\n", "c.jsonl:1: json: cannot unmarshal number"},
		{"d.csv", "", "name,type\nx,Chemical\n", `d.csv:1: CSV header "name,type" has no "phrase" column`},
		{"d.csv", "", "phrase,type\nx,Chemical\ny\n", "d.csv: record on line 3: wrong number of fields"},
		{"d.csv", "", "", "d.csv:1: empty CSV file"},
		{"e.list", "csv", "x\n", `e.list:1: CSV header "x" has no "phrase" column`},
	}
	for _, c := range cases {
		_, err := Read(strings.NewReader(c.content), Source{Path: c.path, Format: Format(c.format)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: error %v, want it to contain %q", c.path, c.content, err, c.want)
		}
	}
}

func TestLoadFoldedDuplicates(t *testing.T) {
	in := "Chemical\tAspirin\nChemical\taspirin\nChemical\tASPIRIN\n"
	g, err := Read(strings.NewReader(in), Source{Path: "x.txt"}, WithCase(CaseFold))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Entries) != 1 || g.Report.Duplicates.Count != 2 {
		t.Errorf("fold: %d entries, %d duplicates; want 1, 2", len(g.Entries), g.Report.Duplicates.Count)
	}
	g, err = Read(strings.NewReader(in), Source{Path: "x.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Entries) != 3 || g.Report.Duplicates.Count != 0 {
		t.Errorf("exact: %d entries, %d duplicates; want 3, 0", len(g.Entries), g.Report.Duplicates.Count)
	}
}

func TestParseSource(t *testing.T) {
	src, err := ParseSource("dict.txt,priority=2,type=Chemical,format=untyped")
	want := Source{Path: "dict.txt", Priority: 2, Type: "Chemical", Format: FormatUntyped}
	if err != nil || src != want {
		t.Errorf("got %+v, %v; want %+v", src, err, want)
	}
	for _, bad := range []string{"", "x.txt,priority=high", "x.txt,colour=red", "x.txt,format=xml", "x.txt,priority"} {
		if _, err := ParseSource(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestPunctTokenizer(t *testing.T) {
	got := PunctTokenizer("U.S.-based  Smith's  co.")
	want := []string{"U", ".", "S", ".", "-", "based", "Smith", "'", "s", "co", "."}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// FuzzRead feeds arbitrary bytes to every reader: they may reject the
// input, naming the source, but never panic, and what they keep is sane.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{
		"Chemical\tlithium\nDisease\theart failure\n",
		"lithium\n\n\u200b\n",
		"{\"phrase\": \"x\", \"type\": \"T\", \"aliases\": [\"y\", \"\"]}\n",
		"phrase,type,aliases\nx,T,y|z\n\"a,b\",,\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, format := range []Format{FormatTyped, FormatUntyped, FormatJSONL, FormatCSV} {
			g, err := Read(strings.NewReader(in), Source{Path: "fuzz.txt", Format: format})
			if err != nil {
				if !strings.HasPrefix(err.Error(), "fuzz.txt") {
					t.Errorf("%s: error %q does not name the source", format, err)
				}
				continue
			}
			for _, e := range g.Entries {
				if len(e.Tokens) == 0 || e.Line < 1 {
					t.Errorf("%s: bad entry %+v", format, e)
				}
			}
			if _, err := NewMatcher([]*Gazetteer{g}); err != nil {
				t.Errorf("%s: %v", format, err)
			}
		}
	})
}
