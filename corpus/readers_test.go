package corpus

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func readTextLabels(t *testing.T, text, labels string, opts ...Option) (*Corpus, error) {
	t.Helper()
	opts = append(opts, WithLabels(strings.NewReader(labels), "labels.txt"))
	return Read(strings.NewReader(text), "text.txt", FormatText, opts...)
}

func TestTextLabelsErrors(t *testing.T) {
	cases := []struct {
		text, labels, want string
		kind               error
	}{
		{"a b c\nd e\n", "O O O\nO\n", "text.txt:2: 2 tokens but labels.txt:2 has 1 labels", ErrCountMismatch},
		{"a b\nc\n", "O O\n", "labels.txt:2: no labels for text.txt:2: the labels file ends early", ErrCountMismatch},
		{"a b\n", "O O\nO\n", "labels.txt:2: labels for a sentence that text.txt lacks: it ends at line 1", ErrCountMismatch},
		{"a b\nc\n", "O O\nB-\n", `labels.txt:2: label 1 (token "c"): unknown tag "B-": missing entity type`, ErrUnknownTag},
		{"a b\n\nc\n", "O O\n\nO\n", "text.txt:2: blank line where a sentence was expected (one sentence per line, none empty)", ErrSyntax},
		{"a\n", "PER\n", `labels.txt:1: label 1 (token "a"): unknown tag "PER": want O or a prefix B, I, E or S, a hyphen and a type`, ErrUnknownTag},
		{"", "", "text.txt: empty file: no sentences", ErrEmptyFile},
	}
	for _, c := range cases {
		_, err := readTextLabels(t, c.text, c.labels)
		if err == nil || err.Error() != c.want || !errors.Is(err, c.kind) {
			t.Errorf("text %q labels %q: %v; want %q", c.text, c.labels, err, c.want)
		}
	}
	// CRLF line ends and runs of blanks between tokens are fine.
	c, err := readTextLabels(t, "a  b\r\nc\r\n", "B-X I-X\r\nO\r\n")
	if err != nil || len(c.Sentences) != 2 || strings.Join(c.Sentences[0].Tokens, "|") != "a|b" {
		t.Errorf("CRLF: %+v, %v", c, err)
	}
}

func TestCoNLL(t *testing.T) {
	in := `-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
-DOCSTART- -X- -X- O
Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

raw
text
`
	c, err := Read(strings.NewReader(in), "x.conll", FormatCoNLL)
	if err != nil {
		t.Fatal(err)
	}
	want := []Sentence{
		{DocStart: true, Tokens: []string{"EU", "rejects"}, Tags: []string{"B-ORG", "O"}},
		{DocStart: true, Tokens: []string{"Peter", "Blackburn"}, Tags: []string{"B-PER", "I-PER"}},
		{Tokens: []string{"raw", "text"}},
	}
	if !reflect.DeepEqual(c.Sentences, want) {
		t.Errorf("got %+v", c.Sentences)
	}

	// Columns: the chunk tag in column 2 as the tag, counting from the end.
	c, err = Read(strings.NewReader(in), "x.conll", FormatCoNLL, Columns(0, -2))
	if err != nil || strings.Join(c.Sentences[1].Tags, " ") != "B-NP I-NP" {
		t.Errorf("Columns(0,-2): %+v, %v", c, err)
	}
	// A token column other than the first still sees document separators.
	c, err = Read(strings.NewReader("-DOCSTART- -X- -X- O\n\n1 EU B-ORG\n2 rejects O\n"), "x.conll", FormatCoNLL, Columns(1, -1))
	if err != nil || !c.Sentences[0].DocStart || strings.Join(c.Sentences[0].Tokens, " ") != "EU rejects" {
		t.Errorf("Columns(1,-1): %+v, %v", c, err)
	}
	// Tab-separated with comments.
	c, err = Read(strings.NewReader("# id = 1\nNew\tB-LOC\nYork\tI-LOC\n"), "x.tsv", FormatCoNLL, CommentPrefix("# "))
	if err != nil || strings.Join(c.Sentences[0].Tokens, " ") != "New York" {
		t.Errorf("comments: %+v, %v", c, err)
	}
	// Without CommentPrefix "#" is a token.
	c, err = Read(strings.NewReader("# O\n1 O\n"), "x.conll", FormatCoNLL)
	if err != nil || c.Sentences[0].Tokens[0] != "#" {
		t.Errorf("hash token: %+v, %v", c, err)
	}

	errs := []struct{ in, want string }{
		{"a O\nb\n", `x.conll:2: token "b" has no tag, unlike the earlier tokens of its sentence (from line 1)`},
		{"a\nb O\n", `x.conll:2: token "b" has a tag, unlike the earlier tokens of its sentence (from line 1)`},
		{"a O\nb B-X\nc I-X\nd X-Y\n", `x.conll:4: unknown tag "X-Y": prefix "X" is not one of B, I, E, S`},
	}
	for _, e := range errs {
		_, err := Read(strings.NewReader(e.in), "x.conll", FormatCoNLL)
		if err == nil || err.Error() != e.want {
			t.Errorf("%q: %v; want %q", e.in, err, e.want)
		}
	}
	_, err = Read(strings.NewReader("a b O\n"), "x.conll", FormatCoNLL, Columns(3, -1))
	if err == nil || err.Error() != "x.conll:1: 3 column(s), no token column 3" {
		t.Errorf("missing token column: %v", err)
	}
	_, err = Read(strings.NewReader("a O\n"), "x.conll", FormatCoNLL, Columns(0, 2))
	if err == nil || !strings.Contains(err.Error(), "x.conll:1: 2 columns, no tag column 2") {
		t.Errorf("missing tag column: %v", err)
	}
}

func TestJSONLSpanForm(t *testing.T) {
	in := `{"text": "  Zoë  visited New York City .", "spans": [{"start": 15, "end": 28, "label": "LOC"}, {"start": 2, "end": 5, "label": "PER"}], "id": 7}

{"text": "nothing here", "spans": []}
{"text": "unlabeled text", "doc_start": true}
{"tokens": ["a", "b"], "tags": ["B-X", "I-X"]}
{"tokens": ["c"]}
`
	c, err := Read(strings.NewReader(in), "x.jsonl", FormatJSONL)
	if err != nil {
		t.Fatal(err)
	}
	want := []Sentence{
		{Tokens: strings.Fields("Zoë visited New York City ."), Tags: strings.Fields("B-PER O B-LOC I-LOC I-LOC O")},
		{Tokens: strings.Fields("nothing here"), Tags: []string{"O", "O"}},
		{Tokens: strings.Fields("unlabeled text"), DocStart: true},
		{Tokens: []string{"a", "b"}, Tags: []string{"B-X", "I-X"}},
		{Tokens: []string{"c"}},
	}
	if !reflect.DeepEqual(c.Sentences, want) {
		t.Errorf("got %+v", c.Sentences)
	}
	c, err = Read(strings.NewReader(in), "x.jsonl", FormatJSONL, WithScheme(BIOES))
	if err != nil || strings.Join(c.Sentences[0].Tags, " ") != "S-PER O B-LOC I-LOC E-LOC O" {
		t.Errorf("BIOES span reading: %+v, %v", c.Sentences[0], err)
	}

	errs := []struct{ in, want string }{
		{`{"text": "New York", "spans": [{"start": 0, "end": 2, "label": "LOC"}]}`, `x.jsonl:1: spans[0] [0,2) "Ne" does not start and end on token boundaries (text is split on white space)`},
		{`{"text": "New York", "spans": [{"start": 1, "end": 8, "label": "LOC"}]}`, `does not start and end on token boundaries`},
		{`{"text": "New York", "spans": [{"start": 0, "end": 9, "label": "LOC"}]}`, `spans[0] [0,9) is not a non-empty range of the 8-character text`},
		{`{"text": "New York", "spans": [{"start": 0, "label": "LOC"}]}`, `spans[0]: missing start or end`},
		{`{"text": "New York", "spans": [{"start": 0, "end": 8, "label": ""}]}`, `missing entity type`},
		{`{"text": "a b c", "spans": [{"start": 0, "end": 3, "label": "X"}, {"start": 2, "end": 5, "label": "X"}]}`, `overlaps`},
		{`{"text": "   "}`, `empty sentence: no tokens in text`},
		{`{"tokens": []}`, `empty sentence: no tokens`},
		{`{"tokens": ["a", ""]}`, `tokens[1] is empty`},
		{`{"tokens": ["a"], "tags": ["O", "O"]}`, `x.jsonl:1: 1 tokens but 2 tags`},
		{`{"tokens": ["a"], "tags": ["B-"]}`, `x.jsonl:1: tags[0] (token "a"): unknown tag "B-": missing entity type`},
		{`{"tokens": ["a"], "text": "a"}`, `both "tokens" and "text"`},
		{`{"tokens": ["a"], "spans": []}`, `"spans" goes with "text"`},
		{`{"text": "a", "tags": ["O"]}`, `"tags" goes with "tokens"`},
		{`{"words": ["a"]}`, `neither "tokens" nor "text"`},
		{`{"tokens": ["a"]`, `x.jsonl:1: invalid JSON`},
		{`["a"]`, `invalid JSON`},
	}
	for _, e := range errs {
		_, err := Read(strings.NewReader(e.in+"\n"), "x.jsonl", FormatJSONL)
		if err == nil || !strings.Contains(err.Error(), e.want) {
			t.Errorf("%s: %v; want %q", e.in, err, e.want)
		}
	}
	_, err = Read(strings.NewReader(`{"text": "a b", "spans": [{"start": 0, "end": 1, "label": "X"}, {"start": 2, "end": 3, "label": "X"}]}`), "x.jsonl", FormatJSONL, WithScheme(IO))
	if !errors.Is(err, ErrBoundaryLost) {
		t.Errorf("adjacent spans read as IO: %v", err)
	}
}

func TestCK(t *testing.T) {
	in := `<s> O None
Tricuspid I Disease
valve O Disease
and I None
lithium I Chemical
lithium I Chemical
carbonate O Chemical
<eof> I None

-DOCSTART-

<s> O None S
the I None S
drug B Chemical S
of I None
<eof> I None
no I None
here B Disease
`
	c, err := Read(strings.NewReader(in), "x.ck", FormatCK)
	if err != nil {
		t.Fatal(err)
	}
	want := []Sentence{
		{Tokens: strings.Fields("Tricuspid valve and lithium lithium carbonate"), Tags: strings.Fields("B-Disease I-Disease O B-Chemical B-Chemical I-Chemical")},
		{DocStart: true, Tokens: strings.Fields("the drug of"), Tags: strings.Fields("O B-Chemical O")},
		{Tokens: strings.Fields("no here"), Tags: strings.Fields("O B-Disease")},
	}
	if !reflect.DeepEqual(c.Sentences, want) {
		t.Errorf("got %+v", c.Sentences)
	}
	c, err = Read(strings.NewReader(in), "x.ck", FormatCK, WithScheme(IOB1))
	if err != nil || strings.Join(c.Sentences[0].Tags, " ") != "I-Disease I-Disease O I-Chemical B-Chemical I-Chemical" {
		t.Errorf("IOB1: %+v, %v", c.Sentences[0], err)
	}
	// A tied run of None tokens is still outside any entity.
	c, err = Read(strings.NewReader("<s> O None\na I None\nb O None\nc I X\n<eof> I None\n"), "x.ck", FormatCK)
	if err != nil || strings.Join(c.Sentences[0].Tags, " ") != "O O B-X" {
		t.Errorf("tied None: %+v, %v", c, err)
	}

	errs := []struct{ in, want string }{
		{"<s> O None\na I X\nb O Y\n", `x.ck:3: tie (O) joins type "Y" to a segment of type "X"`},
		{"<s> O None\na I None\nb O Y\n", `x.ck:3: tie (O) joins type "Y" to a segment of type "None"`},
		{"<s> O None\na O X\n", `x.ck:2: tie (O) on the first token of a sentence`},
		{"a I X,Y\n", `x.ck:1: type "X,Y" names several types; hard tags need one`},
		{"a O None D\n", `x.ck:1: boundary marked D (unknown) cannot be read into hard tags`},
		{"a I None Q\n", `fourth column "Q"`},
		{"a X None\n", `boundary "X": want I (break) or O (tie)`},
		{"a I\n", `x.ck:1: 2 columns: want token, I or O, type and optionally S or D`},
		{"<s> O None\n<eof> I None\n", `x.ck:2: <eof> marker ends an empty sentence`},
		{"<s> O None\na I None\n<s> O None\n", `x.ck:3: <s> marker inside a sentence (started on line 1)`},
		{"a I None\n-DOCSTART-\n", `x.ck:2: -DOCSTART- inside a sentence`},
		{"<s> O None\n\n", `x.ck:1: empty sentence`},
	}
	for _, e := range errs {
		_, err := Read(strings.NewReader(e.in), "x.ck", FormatCK)
		if err == nil || !strings.Contains(err.Error(), e.want) {
			t.Errorf("%q: %v; want %q", e.in, err, e.want)
		}
	}
	_, err = Read(strings.NewReader("a I None\nb I Gene\n"), "x.ck", FormatCK, WithTypes("Chemical", "Disease"))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 2 || !errors.Is(err, ErrUnknownTag) {
		t.Errorf("unknown type: %v", err)
	}
}

// TestCKWrite pins the exact text AutoNER's files use.
func TestCKWrite(t *testing.T) {
	c := &Corpus{Sentences: []Sentence{
		{Tokens: strings.Fields("lithium carbonate toxicity"), Tags: strings.Fields("B-Chemical I-Chemical B-Disease")},
		{DocStart: true, Tokens: []string{"x"}},
	}}
	var b strings.Builder
	if err := Write(&b, c, FormatCK); err != nil {
		t.Fatal(err)
	}
	want := "<s> O None\nlithium I Chemical\ncarbonate O Chemical\ntoxicity I Disease\n<eof> I None\n\n" +
		"-DOCSTART-\n\n<s> O None\nx I None\n<eof> I None\n\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
