package distant

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxLine bounds one line of a gazetteer or stopword file.
const maxLine = 1 << 20

// maxExamples bounds the examples a LoadReport keeps per kind of issue.
const maxExamples = 10

// Format is a gazetteer file format.
type Format string

const (
	// FormatTyped is one `Type<TAB>phrase` per line; several types may be
	// given comma-separated ("Chemical,Disease<TAB>...").
	FormatTyped Format = "typed"
	// FormatUntyped is one phrase per line, of unknown type.
	FormatUntyped Format = "untyped"
	// FormatJSONL is one {"phrase": ..., "type": ..., "aliases": [...]}
	// object per line; type and aliases are optional.
	FormatJSONL Format = "jsonl"
	// FormatCSV has a header with a "phrase" column and optional "type" and
	// "aliases" columns (aliases separated by "|").
	FormatCSV Format = "csv"
)

// Entry is one phrase of a gazetteer.
type Entry struct {
	Phrase string   // as written in the file
	Tokens []string // Phrase split by the tokenizer, not yet normalized
	Type   string   // entity type; "" for a phrase of unknown type
	Line   int      // 1-based line in the source
}

// Issue is one skipped or suspicious line of a gazetteer.
type Issue struct {
	Line   int    `json:"line"`
	Phrase string `json:"phrase"`
	Detail string `json:"detail,omitempty"`
}

// Issues counts one kind of issue and keeps the first few as examples.
type Issues struct {
	Count    int     `json:"count"`
	Examples []Issue `json:"examples,omitempty"`
}

func (is *Issues) add(i Issue) {
	is.Count++
	if len(is.Examples) < maxExamples {
		is.Examples = append(is.Examples, i)
	}
}

// LoadReport says what loading a gazetteer found.
type LoadReport struct {
	Source   string         `json:"source"`
	Format   Format         `json:"format"`
	Priority int            `json:"priority"`
	Entries  int            `json:"entries"`
	Types    map[string]int `json:"types"` // entries per type; "" counts untyped ones
	// Duplicates repeat an earlier phrase with the same type (after
	// tokenization and normalization); they are dropped.
	Duplicates Issues `json:"duplicates"`
	// Conflicts repeat an earlier phrase with another type; both are kept
	// and the matcher marks the phrase ambiguous.
	Conflicts Issues `json:"conflicts"`
	Empty     Issues `json:"empty"`     // blank phrases, dropped
	NoTokens  Issues `json:"no_tokens"` // phrases the tokenizer reduces to nothing, dropped
}

// Gazetteer is a list of entity phrases from one source.
type Gazetteer struct {
	Name     string
	Priority int // a higher priority wins when gazetteers disagree on a phrase's type
	Entries  []Entry
	Report   LoadReport
}

// Source names a gazetteer to load and how to use it.
type Source struct {
	Path     string
	Format   Format // empty: detect from the file name and first line
	Priority int
	// Type is given to entries that have none, turning a plain phrase list
	// into a typed gazetteer.
	Type string
}

// ParseSource parses a gazetteer spec of the form
// `PATH[,priority=N][,type=T][,format=F]`, as given on the command line.
// A path that contains a comma cannot be given this way.
func ParseSource(spec string) (Source, error) {
	parts := strings.Split(spec, ",")
	src := Source{Path: parts[0]}
	if src.Path == "" {
		return src, fmt.Errorf("gazetteer %q: empty path", spec)
	}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return src, fmt.Errorf("gazetteer %q: option %q is not key=value", spec, p)
		}
		switch k {
		case "priority":
			n, err := strconv.Atoi(v)
			if err != nil {
				return src, fmt.Errorf("gazetteer %q: priority: %w", spec, err)
			}
			src.Priority = n
		case "type":
			src.Type = v
		case "format":
			f := Format(strings.ToLower(v))
			switch f {
			case FormatTyped, FormatUntyped, FormatJSONL, FormatCSV:
				src.Format = f
			default:
				return src, fmt.Errorf("gazetteer %q: unknown format %q (want typed, untyped, jsonl or csv)", spec, v)
			}
		default:
			return src, fmt.Errorf("gazetteer %q: unknown option %q (want priority, type or format)", spec, k)
		}
	}
	return src, nil
}

// Load reads the gazetteer that src names.
func Load(src Source, opts ...Option) (*Gazetteer, error) {
	f, err := os.Open(src.Path)
	if err != nil {
		return nil, fmt.Errorf("gazetteer: %w", err)
	}
	defer f.Close()
	return Read(f, src, opts...)
}

// Read reads a gazetteer from r; src.Path names it in errors and reports
// and, when src.Format is empty, its extension selects the format.
func Read(r io.Reader, src Source, opts ...Option) (*Gazetteer, error) {
	c := newConfig(opts)
	br := bufio.NewReaderSize(r, 64*1024)
	format := src.Format
	if format == "" {
		format = detectFormat(src.Path, br)
	}
	l := &loader{
		c:    c,
		norm: c.normalizer(),
		src:  src,
		g: &Gazetteer{Name: src.Path, Priority: src.Priority, Report: LoadReport{
			Source: src.Path, Format: format, Priority: src.Priority, Types: map[string]int{},
		}},
		seen: map[string]string{},
	}
	var err error
	switch format {
	case FormatTyped, FormatUntyped:
		err = l.readText(br, format == FormatTyped)
	case FormatJSONL:
		err = l.readJSONL(br)
	case FormatCSV:
		err = l.readCSV(br)
	default:
		err = fmt.Errorf("unknown format %q", format)
	}
	if err != nil {
		return nil, err
	}
	l.g.Report.Entries = len(l.g.Entries)
	return l.g, nil
}

// detectFormat picks the format from the extension, and for text lists from
// whether the first non-blank line has a tab.
func detectFormat(path string, br *bufio.Reader) Format {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		return FormatJSONL
	case ".csv":
		return FormatCSV
	}
	// Peek returns what it could read along with an error at a short
	// input; a real read error shows again when the lines are read.
	buf, _ := br.Peek(64 * 1024)
	for _, line := range bytes.Split(buf, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if bytes.IndexByte(line, '\t') >= 0 {
			return FormatTyped
		}
		return FormatUntyped
	}
	return FormatUntyped
}

type loader struct {
	c    config
	norm normalizer
	src  Source
	g    *Gazetteer
	// seen holds "tokens\x00type" for every kept entry (to find duplicates)
	// and maps "tokens" to the first type seen for them (to find conflicts).
	seen map[string]string
}

func (l *loader) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", l.src.Path, line, fmt.Sprintf(format, args...))
}

// add tokenizes a phrase and keeps it unless it is blank, tokenizes to
// nothing, or repeats an earlier entry.
func (l *loader) add(line int, phrase, typ string) {
	rep := &l.g.Report
	if typ == "" {
		typ = l.src.Type
	}
	if strings.TrimSpace(phrase) == "" {
		rep.Empty.add(Issue{Line: line, Phrase: phrase})
		return
	}
	toks := l.c.tokenize(phrase)
	normed := make([]string, 0, len(toks))
	kept := toks[:0:0]
	for _, t := range toks {
		if n := l.norm.token(t); n != "" {
			normed = append(normed, n)
			kept = append(kept, t)
		}
	}
	if len(normed) == 0 {
		rep.NoTokens.add(Issue{Line: line, Phrase: phrase})
		return
	}
	key := strings.Join(normed, keySep)
	if _, dup := l.seen[key+"\x00"+typ]; dup {
		rep.Duplicates.add(Issue{Line: line, Phrase: phrase, Detail: typeOrUntyped(typ)})
		return
	}
	l.seen[key+"\x00"+typ] = ""
	if first, ok := l.seen[key]; ok {
		if first != "" && typ != "" {
			rep.Conflicts.add(Issue{Line: line, Phrase: phrase, Detail: first + " vs " + typ})
		}
	} else {
		l.seen[key] = typ
	}
	rep.Types[typ]++
	l.g.Entries = append(l.g.Entries, Entry{Phrase: phrase, Tokens: kept, Type: typ, Line: line})
}

func typeOrUntyped(t string) string {
	if t == "" {
		return "untyped"
	}
	return t
}

func (l *loader) readText(r io.Reader, typed bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSuffix(sc.Text(), "\r")
		if line == 1 {
			text = strings.TrimPrefix(text, "\uFEFF")
		}
		if !typed {
			if strings.Contains(text, "\t") {
				return l.errorf(line, "tab in a list of untyped phrases (a typed list has a tab on every line: Type<TAB>phrase)")
			}
			l.add(line, text, "")
			continue
		}
		if strings.TrimSpace(text) == "" {
			l.g.Report.Empty.add(Issue{Line: line})
			continue
		}
		types, phrase, ok := strings.Cut(text, "\t")
		if !ok {
			return l.errorf(line, "no tab: want Type<TAB>phrase")
		}
		if strings.Contains(phrase, "\t") {
			return l.errorf(line, "more than one tab: want Type<TAB>phrase")
		}
		for _, typ := range strings.Split(types, ",") {
			if typ = strings.TrimSpace(typ); typ == "" {
				return l.errorf(line, "empty type in %q", types)
			}
			l.add(line, phrase, typ)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", l.src.Path, line+1, err)
	}
	return nil
}

// jsonEntry is one line of a JSONL gazetteer. Phrase is a pointer so that a
// missing key (a typo such as "phrse") is an error, not an empty phrase.
type jsonEntry struct {
	Phrase  *string  `json:"phrase"`
	Type    string   `json:"type"`
	Aliases []string `json:"aliases"`
}

func (l *loader) readJSONL(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\uFEFF"))
		}
		if len(b) == 0 {
			continue
		}
		var e jsonEntry
		if err := json.Unmarshal(b, &e); err != nil {
			return l.errorf(line, "%v", err)
		}
		if e.Phrase == nil {
			return l.errorf(line, `no "phrase" key`)
		}
		l.add(line, *e.Phrase, e.Type)
		for _, a := range e.Aliases {
			l.add(line, a, e.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", l.src.Path, line+1, err)
	}
	return nil
}

func (l *loader) readCSV(r io.Reader) error {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return l.errorf(1, "empty CSV file: want a header with a phrase column")
	}
	if err != nil {
		return fmt.Errorf("%s: %w", l.src.Path, err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\uFEFF")))
		if _, dup := col[h]; dup && h != "" {
			return l.errorf(1, "column %q appears twice in the header", h)
		}
		col[h] = i
	}
	phraseCol, ok := col["phrase"]
	if !ok {
		return l.errorf(1, "CSV header %q has no \"phrase\" column", strings.Join(header, ","))
	}
	typeCol, hasType := col["type"]
	aliasCol, hasAliases := col["aliases"]
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			// csv.ParseError already names the line.
			return fmt.Errorf("%s: %w", l.src.Path, err)
		}
		line, _ := cr.FieldPos(phraseCol)
		typ := ""
		if hasType {
			typ = strings.TrimSpace(rec[typeCol])
		}
		l.add(line, rec[phraseCol], typ)
		if hasAliases && strings.TrimSpace(rec[aliasCol]) != "" {
			for _, a := range strings.Split(rec[aliasCol], "|") {
				l.add(line, a, typ)
			}
		}
	}
}
