package corpus

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sample is a corpus with what the formats must carry: documents, entities
// of several lengths and types, adjacent entities of one type, an unlabeled
// sentence, non-ASCII tokens, and JSON/HTML-special characters.
func sample() *Corpus {
	return &Corpus{Sentences: []Sentence{
		{DocStart: true, Tokens: strings.Fields("EU rejects German call to boycott British lamb ."), Tags: strings.Fields("B-ORG O B-MISC O O O B-MISC O O")},
		{Tokens: strings.Fields("Peter Blackburn"), Tags: strings.Fields("B-PER I-PER")},
		{Tokens: strings.Fields("Müller met Zoë Ça <b> \"quoted\" & co"), Tags: strings.Fields("B-PER O B-PER B-PER O O O O")},
		{DocStart: true, Tokens: strings.Fields("BRUSSELS 1996-08-22")},
		{Tokens: strings.Fields("New York Stock Exchange"), Tags: strings.Fields("B-ORG I-ORG I-ORG I-ORG")},
	}}
}

// labeled drops the unlabeled sentence, for formats that need tags.
func labeled(c *Corpus) *Corpus {
	out := &Corpus{}
	for _, s := range c.Sentences {
		if s.Tags != nil {
			out.Sentences = append(out.Sentences, s)
		}
	}
	return out
}

// withoutDocs clears DocStart, for formats that do not keep it.
func withoutDocs(c *Corpus) *Corpus {
	out := &Corpus{}
	for _, s := range c.Sentences {
		s.DocStart = false
		out.Sentences = append(out.Sentences, s)
	}
	return out
}

func roundTrip(t *testing.T, c *Corpus, f Format, opts ...Option) *Corpus {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, c, f, opts...); err != nil {
		t.Fatalf("Write %s: %v", f, err)
	}
	got, err := Read(&buf, "mem."+string(f), f, opts...)
	if err != nil {
		t.Fatalf("Read %s: %v\n%s", f, err, buf.String())
	}
	return got
}

func TestRoundTrip(t *testing.T) {
	cases := []struct {
		f    Format
		in   *Corpus
		want *Corpus
	}{
		{FormatCoNLL, sample(), sample()},
		{FormatJSONL, sample(), sample()},
		{FormatJSONLSpans, sample(), sample()},
		{FormatCK, labeled(sample()), labeled(sample())},
		{FormatText, sample(), withoutDocs(&Corpus{Sentences: []Sentence{
			// FormatText alone writes and reads tokens only.
			{Tokens: sample().Sentences[0].Tokens}, {Tokens: sample().Sentences[1].Tokens},
			{Tokens: sample().Sentences[2].Tokens}, {Tokens: sample().Sentences[3].Tokens},
			{Tokens: sample().Sentences[4].Tokens},
		}})},
	}
	for _, c := range cases {
		t.Run(string(c.f), func(t *testing.T) {
			got := roundTrip(t, c.in, c.f)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("round trip through %s:\n got %+v\nwant %+v", c.f, got.Sentences, c.want.Sentences)
			}
		})
	}
}

// TestRoundTripSchemes writes BIOES tags and reads them back in every format
// that stores tags verbatim, and in the span formats asked for BIOES.
func TestRoundTripSchemes(t *testing.T) {
	c := labeled(sample())
	if err := c.Convert(BIO, BIOES); err != nil {
		t.Fatal(err)
	}
	for _, f := range []Format{FormatCoNLL, FormatJSONL, FormatJSONLSpans, FormatCK} {
		got := roundTrip(t, c, f, WithScheme(BIOES), Strict())
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%s: got %+v\nwant %+v", f, got.Sentences, c.Sentences)
		}
	}
}

func TestTextLabelsFiles(t *testing.T) {
	dir := t.TempDir()
	text, labels := filepath.Join(dir, "train_text.txt"), filepath.Join(dir, "train_label.txt")
	want := withoutDocs(labeled(sample()))
	if err := WriteTextLabels(text, labels, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTextLabels(text, labels)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got.Sentences, want.Sentences)
	}
	b, _ := os.ReadFile(labels)
	if first, _, _ := strings.Cut(string(b), "\n"); first != "B-ORG O B-MISC O O O B-MISC O O" {
		t.Errorf("labels file starts %q", first)
	}
	// Labels alone, as eval reads them.
	lc, err := ReadFile(labels, WithFormat(FormatLabels))
	if err != nil {
		t.Fatal(err)
	}
	if len(lc.Sentences) != 4 || lc.Sentences[1].Tokens != nil || strings.Join(lc.Sentences[1].Tags, " ") != "B-PER I-PER" {
		t.Errorf("labels-only read: %+v", lc.Sentences)
	}
	// Text alone is unlabeled.
	tc, err := ReadTextLabels(text, "")
	if err != nil || tc.Sentences[0].Tags != nil || len(tc.Sentences[0].Tokens) != 9 {
		t.Errorf("text-only read: %+v, %v", tc, err)
	}
}

func TestFilesAndDetection(t *testing.T) {
	dir := t.TempDir()
	want := sample()
	for _, name := range []string{"a.conll", "a.bio", "a.tsv", "a.jsonl", "a.conll.gz", "a.jsonl.gz"} {
		path := filepath.Join(dir, name)
		if err := WriteFile(path, want); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v", name, got.Sentences)
		}
	}
	gz, _ := os.ReadFile(filepath.Join(dir, "a.conll.gz"))
	if len(gz) < 2 || gz[0] != 0x1f || gz[1] != 0x8b {
		t.Error("a.conll.gz is not gzip")
	}
	// An explicit format beats the extension.
	path := filepath.Join(dir, "spans.data")
	if err := WriteFile(path, want, WithFormat(FormatJSONLSpans)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), `{"text":"EU rejects German call to boycott British lamb .","spans":[{"start":0,"end":2,"label":"ORG"}`) {
		t.Errorf("span form starts %q", b[:80])
	}
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), "cannot tell the corpus format") {
		t.Errorf("ReadFile(.data) = %v; want a detection error", err)
	}
	if got, err := ReadFile(path, WithFormat(FormatJSONL)); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ReadFile(span form) = %+v, %v", got, err)
	}

	for ext, f := range map[string]Format{"x.txt": FormatText, "x.CONLL": FormatCoNLL, "x.iobes": FormatCoNLL, "x.ndjson": FormatJSONL, "d/x.ck": FormatCK, "x.ck.gz": FormatCK} {
		if got, err := DetectFormat(ext); err != nil || got != f {
			t.Errorf("DetectFormat(%q) = %q, %v; want %q", ext, got, err, f)
		}
	}
	if _, err := ParseFormat("xml"); err == nil || !strings.Contains(err.Error(), "conll, jsonl") {
		t.Errorf("ParseFormat(xml) = %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.conll")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v", err)
	}
}

func TestScannerLines(t *testing.T) {
	in := "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n\n\nPeter NNP B-NP B-PER\n"
	sc := NewScanner(strings.NewReader(in), "x.conll", FormatCoNLL)
	var lines []int
	for sc.Scan() {
		lines = append(lines, sc.Line())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(lines, []int{3, 8}) {
		t.Errorf("sentence lines %v; want [3 8]", lines)
	}
	if sc := NewScanner(strings.NewReader(in), "x", "xml"); sc.Scan() || sc.Err() == nil {
		t.Error("a scanner with an unknown format scanned")
	}
}

// readErr reads in and returns the error, which must be a *ParseError.
func readErr(t *testing.T, in string, f Format, opts ...Option) *ParseError {
	t.Helper()
	_, err := Read(strings.NewReader(in), "in."+string(f), f, opts...)
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("Read(%q) error = %v; want a *ParseError", in, err)
	}
	return pe
}

func TestWriteErrors(t *testing.T) {
	cases := []struct {
		f   Format
		s   Sentence
		msg string
	}{
		{FormatCoNLL, Sentence{}, "no tokens"},
		{FormatCoNLL, Sentence{Tokens: []string{"a", "b"}, Tags: []string{"O"}}, "2 tokens but 1 tags"},
		{FormatCoNLL, Sentence{Tokens: []string{"New York"}}, "white space"},
		{FormatText, Sentence{Tokens: []string{""}}, "empty"},
		{FormatCoNLL, Sentence{Tokens: []string{"a"}, Tags: []string{"B-"}}, "missing entity type"},
		{FormatCoNLL, Sentence{Tokens: []string{DocStart}}, "document separator"},
		{FormatCK, Sentence{Tokens: []string{"<s>"}}, "marker"},
		{FormatCK, Sentence{Tokens: []string{"a"}, Tags: []string{"B-None"}}, "None means a non-entity"},
		{FormatLabels, Sentence{Tokens: []string{"a"}}, "no tags"},
		{FormatJSONLSpans, Sentence{Tokens: []string{"a b"}}, "white space"},
	}
	for _, c := range cases {
		err := Write(&bytes.Buffer{}, &Corpus{Sentences: []Sentence{{Tokens: []string{"ok"}, Tags: []string{"O"}}, c.s}}, c.f)
		if err == nil || !strings.HasPrefix(err.Error(), "sentence 2: ") || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Write %s %+v = %v; want sentence 2 and %q", c.f, c.s, err, c.msg)
		}
	}
	// JSONL's token form holds any token.
	if err := Write(&bytes.Buffer{}, &Corpus{Sentences: []Sentence{{Tokens: []string{"New York"}}}}, FormatJSONL); err != nil {
		t.Errorf("JSONL with a spaced token: %v", err)
	}
}

func TestCommonReadErrors(t *testing.T) {
	for _, f := range []Format{FormatText, FormatLabels, FormatCoNLL, FormatJSONL, FormatCK} {
		for _, in := range []string{"", "\n\n", "  \n"} {
			pe := readErr(t, in, f)
			if f == FormatText || f == FormatLabels {
				if in != "" { // blank lines in a one-sentence-per-line file
					if !errors.Is(pe, ErrSyntax) || pe.Line != 1 {
						t.Errorf("%s %q: %v; want a syntax error on line 1", f, in, pe)
					}
					continue
				}
			}
			if !errors.Is(pe, ErrEmptyFile) || pe.Line != 0 || pe.Error() != "in."+string(f)+": empty file: no sentences" {
				t.Errorf("%s %q: %v; want ErrEmptyFile", f, in, pe)
			}
		}
	}
	bad := map[Format]string{
		FormatText:   "a b\nc \xff d\n",
		FormatLabels: "O O\nO \xffO\n",
		FormatCoNLL:  "a O\n\nb \xc3\x28\n",
		FormatJSONL:  "{\"tokens\":[\"a\"]}\n{\"tokens\":[\"\xff\"]}\n",
		FormatCK:     "<s> O None\na I None\n<eof> I None\n\nb\xff I None\n",
	}
	for f, in := range bad {
		pe := readErr(t, in, f)
		if !errors.Is(pe, ErrInvalidUTF8) || pe.Line != len(strings.Split(strings.TrimSuffix(in, "\n"), "\n")) {
			t.Errorf("%s: %v; want ErrInvalidUTF8 on the last line", f, pe)
		}
	}
	pe := readErr(t, "ok\nab\xffc\n", FormatText)
	if pe.Error() != "in.text:2: invalid UTF-8 at byte 3 of the line" {
		t.Errorf("message %q", pe.Error())
	}
}

func TestTagChecks(t *testing.T) {
	in := "a B-PER\nb I-PER\n\nc O\nd E-LOC\n"
	if _, err := Read(strings.NewReader(in), "x", FormatCoNLL); err != nil {
		t.Fatalf("default scheme: %v", err)
	}
	pe := readErr(t, in, FormatCoNLL, WithScheme(BIO))
	if pe.Line != 5 || !errors.Is(pe, ErrUnknownTag) || !strings.Contains(pe.Error(), "bio scheme has no E- prefix") {
		t.Errorf("BIO: %v", pe)
	}
	pe = readErr(t, in, FormatCoNLL, WithTypes("PER", "ORG"))
	if pe.Line != 5 || pe.Error() != `in.conll:5: unknown tag "E-LOC": entity type "LOC" is not one of ORG, PER` {
		t.Errorf("types: %v", pe)
	}
	pe = readErr(t, "a O\nb I-PER\n", FormatCoNLL, WithScheme(BIO), Strict())
	if pe.Line != 2 || !errors.Is(pe, ErrInvalidSequence) {
		t.Errorf("strict: %v", pe)
	}
	if _, err := Read(strings.NewReader("a O\nb I-PER\n"), "x", FormatCoNLL, WithScheme(BIO)); err != nil {
		t.Errorf("non-strict read of I- after O: %v", err)
	}
}
