package corpus

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

// Format names a corpus file format.
type Format string

// The formats nerflow reads and writes.
const (
	// FormatText: one sentence per line, tokens separated by white space
	// (written with single spaces); the tags, if any, live in a parallel
	// FormatLabels file (see ReadTextLabels). Document starts are not kept.
	FormatText Format = "text"
	// FormatLabels: the tags alone, one sentence per line, as the
	// train_label_*.txt files; its sentences have nil Tokens.
	FormatLabels Format = "labels"
	// FormatCoNLL: one token per line with the tag in a column (by default
	// the token in the first and the tag in the last), a blank line between
	// sentences, "-DOCSTART-" lines between documents.
	FormatCoNLL Format = "conll"
	// FormatJSONL: one JSON object per line, {"tokens": [...], "tags": [...]}
	// or {"text": "...", "spans": [{"start", "end", "label"}]} with character
	// offsets; both forms are read, the token form is written.
	FormatJSONL Format = "jsonl"
	// FormatJSONLSpans is FormatJSONL written in the span form.
	FormatJSONLSpans Format = "jsonl-spans"
	// FormatCK: AutoNER's Tie-or-Break format, "token I|O type" per line.
	FormatCK Format = "ck"
)

type formatSpec struct {
	exts       []string
	newDecoder func(r io.Reader, name string, o *options) decoder
	newEncoder func(w io.Writer, o *options) encoder
}

var formats = map[Format]formatSpec{
	FormatText:       {exts: []string{".txt"}, newDecoder: newTextDecoder, newEncoder: newTextEncoder},
	FormatLabels:     {newDecoder: newLabelsDecoder, newEncoder: newLabelsEncoder},
	FormatCoNLL:      {exts: []string{".conll", ".bio", ".iob", ".bioes", ".iobes", ".tsv"}, newDecoder: newCoNLLDecoder, newEncoder: newCoNLLEncoder},
	FormatJSONL:      {exts: []string{".jsonl", ".ndjson"}, newDecoder: newJSONLDecoder, newEncoder: newJSONLEncoder(false)},
	FormatJSONLSpans: {newDecoder: newJSONLDecoder, newEncoder: newJSONLEncoder(true)},
	FormatCK:         {exts: []string{".ck"}, newDecoder: newCKDecoder, newEncoder: newCKEncoder},
}

// Formats lists the format names, sorted.
func Formats() []string {
	var names []string
	for f := range formats {
		names = append(names, string(f))
	}
	slices.Sort(names)
	return names
}

// ParseFormat checks a format name.
func ParseFormat(name string) (Format, error) {
	f := Format(strings.ToLower(name))
	if _, ok := formats[f]; !ok {
		return "", fmt.Errorf("unknown corpus format %q (want one of %s)", name, strings.Join(Formats(), ", "))
	}
	return f, nil
}

// DetectFormat picks a format from a file name's extension, looking through
// a trailing .gz: .txt is text, .conll/.bio/.iob/.bioes/.iobes/.tsv are
// CoNLL, .jsonl/.ndjson are JSONL, .ck is Tie-or-Break.
func DetectFormat(path string) (Format, error) {
	ext := strings.ToLower(filepath.Ext(strings.TrimSuffix(path, ".gz")))
	for f, spec := range formats {
		if slices.Contains(spec.exts, ext) {
			return f, nil
		}
	}
	return "", fmt.Errorf("%s: cannot tell the corpus format from the extension %q; name the format explicitly (%s)", path, ext, strings.Join(Formats(), ", "))
}

// Option configures reading and writing; options that do not concern a
// format are ignored by it.
type Option func(*options)

type options struct {
	format     Format
	scheme     Scheme
	types      map[string]bool
	strict     bool
	tokenCol   int
	tagCol     int
	comment    string
	labels     io.Reader
	labelsName string
}

func newOptions(opts []Option) *options {
	o := &options{tokenCol: 0, tagCol: -1}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// WithFormat overrides format detection in ReadFile and WriteFile.
func WithFormat(f Format) Option { return func(o *options) { o.format = f } }

// WithScheme makes readers accept only the scheme's tag prefixes (by
// default any of B, I, E, S are accepted) and makes the span-based formats
// (JSONL spans, .ck) produce tags in it (by default BIO).
func WithScheme(s Scheme) Option { return func(o *options) { o.scheme = s } }

// WithTypes makes readers reject entity types outside the given set.
func WithTypes(types ...string) Option {
	return func(o *options) {
		o.types = make(map[string]bool, len(types))
		for _, t := range types {
			o.types[t] = true
		}
	}
}

// Strict makes readers also reject tag orders that are not valid in the
// scheme given by WithScheme (see Scheme.Validate), such as I-PER after O
// in BIO. Without it such sequences are read and interpreted the way
// conlleval does.
func Strict() Option { return func(o *options) { o.strict = true } }

// Columns sets the 0-based CoNLL columns of the token and the tag; negative
// numbers count from the end (-1 is the last column). The default is 0, -1.
func Columns(token, tag int) Option { return func(o *options) { o.tokenCol, o.tagCol = token, tag } }

// CommentPrefix makes the CoNLL reader skip lines starting with prefix (such
// as "# "). Off by default: "#" is a legitimate token.
func CommentPrefix(prefix string) Option { return func(o *options) { o.comment = prefix } }

// WithLabels gives the text format its parallel labels file.
func WithLabels(r io.Reader, name string) Option {
	return func(o *options) { o.labels, o.labelsName = r, name }
}

// spanScheme is the scheme span-based formats write their tags in.
func (o *options) spanScheme() Scheme {
	if o.scheme == AnyScheme {
		return BIO
	}
	return o.scheme
}

// badTag returns the 0-based index of the first tag the options reject and
// why, or -1 and nil.
func (o *options) badTag(tags []string) (int, error) {
	check := o.scheme.firstBadTag
	if o.strict {
		check = o.scheme.firstInvalid
	}
	if i, err := check(tags); err != nil {
		return i, err
	}
	if o.types != nil {
		for i, tag := range tags {
			if tag == Outside {
				continue
			}
			if typ := tag[2:]; !o.types[typ] {
				return i, problem(ErrUnknownTag, "unknown tag %q: entity type %q is not one of %s", tag, typ, strings.Join(slices.Sorted(maps.Keys(o.types)), ", "))
			}
		}
	}
	return -1, nil
}

// decoder yields sentences one at a time.
type decoder interface {
	// next returns the next sentence and the line it starts on, or io.EOF.
	next() (Sentence, int, error)
}

// Scanner reads a corpus one sentence at a time, in the manner of
// bufio.Scanner, so that large corpora need not be held in memory:
//
//	sc := corpus.NewScanner(r, "train.conll", corpus.FormatCoNLL)
//	for sc.Scan() {
//		use(sc.Sentence())
//	}
//	if err := sc.Err(); err != nil { ... }
type Scanner struct {
	name  string
	dec   decoder
	close func()
	sent  Sentence
	line  int
	n     int
	err   error
}

// NewScanner reads r, called name in error messages, in format f.
func NewScanner(r io.Reader, name string, f Format, opts ...Option) *Scanner {
	spec, ok := formats[f]
	if !ok {
		_, err := ParseFormat(string(f))
		return &Scanner{name: name, err: err}
	}
	return &Scanner{name: name, dec: spec.newDecoder(r, name, newOptions(opts))}
}

// Scan advances to the next sentence; it returns false at the end of the
// input or on the first error. A file with no sentence is an ErrEmptyFile
// error.
func (sc *Scanner) Scan() bool {
	if sc.err != nil {
		return false
	}
	s, line, err := sc.dec.next()
	if err == io.EOF {
		if sc.n == 0 {
			sc.err = &ParseError{File: sc.name, Err: ErrEmptyFile}
		}
		return false
	}
	if err != nil {
		sc.err = err
		return false
	}
	sc.sent, sc.line = s, line
	sc.n++
	return true
}

// Sentence returns the sentence read by the last Scan.
func (sc *Scanner) Sentence() Sentence { return sc.sent }

// Line returns the line of the input on which the last sentence starts.
func (sc *Scanner) Line() int { return sc.line }

// Err returns the first error met, nil at a clean end of input.
func (sc *Scanner) Err() error { return sc.err }

// Close releases the file of a scanner made by ScanFile; it does nothing for
// one made by NewScanner.
func (sc *Scanner) Close() {
	if sc.close != nil {
		sc.close()
		sc.close = nil
	}
}

// ScanFile opens a corpus file for scanning, in the format given by
// WithFormat or else detected from its extension; .gz files are
// decompressed. Close the scanner when done.
func ScanFile(path string, opts ...Option) (*Scanner, error) {
	f, err := formatFor(path, opts)
	if err != nil {
		return nil, err
	}
	r, closer, err := openFile(path)
	if err != nil {
		return nil, err
	}
	sc := NewScanner(r, path, f, opts...)
	sc.close = closer
	return sc, nil
}

// Read reads a whole corpus from r in format f.
func Read(r io.Reader, name string, f Format, opts ...Option) (*Corpus, error) {
	return collect(NewScanner(r, name, f, opts...))
}

func collect(sc *Scanner) (*Corpus, error) {
	c := &Corpus{}
	for sc.Scan() {
		c.Sentences = append(c.Sentences, sc.Sentence())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// ReadFile reads a corpus file in the format given by WithFormat or else
// detected from its extension; .gz files are decompressed.
func ReadFile(path string, opts ...Option) (*Corpus, error) {
	sc, err := ScanFile(path, opts...)
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	return collect(sc)
}

// ReadTextLabels reads a text file and, when labelsPath is not empty, its
// parallel labels file: line i of each is sentence i, with as many labels
// as tokens.
func ReadTextLabels(textPath, labelsPath string, opts ...Option) (*Corpus, error) {
	text, closeText, err := openFile(textPath)
	if err != nil {
		return nil, err
	}
	defer closeText()
	if labelsPath != "" {
		labels, closeLabels, err := openFile(labelsPath)
		if err != nil {
			return nil, err
		}
		defer closeLabels()
		opts = append(slices.Clip(opts), WithLabels(labels, labelsPath))
	}
	return Read(text, textPath, FormatText, opts...)
}

// formatFor returns the format given by options or detected from path.
func formatFor(path string, opts []Option) (Format, error) {
	if f := newOptions(opts).format; f != "" {
		return ParseFormat(string(f))
	}
	return DetectFormat(path)
}

// openFile opens path for reading, through gzip when it ends in .gz.
func openFile(path string) (io.Reader, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	if !strings.HasSuffix(path, ".gz") {
		return f, func() { f.Close() }, nil
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return zr, func() { zr.Close(); f.Close() }, nil
}

// encoder writes one sentence; i is its 0-based index, for error messages.
type encoder interface {
	encode(i int, s Sentence) error
}

// Write writes c to w in format f. Sentences must have tokens (tags only,
// for FormatLabels) and, when tagged, one tag per token. Every format but
// JSONL refuses tokens that are empty or contain white space.
func Write(w io.Writer, c *Corpus, f Format, opts ...Option) error {
	spec, ok := formats[f]
	if !ok {
		_, err := ParseFormat(string(f))
		return err
	}
	bw := bufio.NewWriter(w)
	enc := spec.newEncoder(bw, newOptions(opts))
	for i, s := range c.Sentences {
		if err := enc.encode(i, s); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteFile writes c to path in the format given by WithFormat or else
// detected from the extension, gzip-compressed when path ends in .gz.
func WriteFile(path string, c *Corpus, opts ...Option) (err error) {
	f, err := formatFor(path, opts)
	if err != nil {
		return err
	}
	return writeFile(path, func(w io.Writer) error { return Write(w, c, f, opts...) })
}

// WriteTextLabels writes the tokens of c to textPath and its tags to
// labelsPath, one sentence per line.
func WriteTextLabels(textPath, labelsPath string, c *Corpus) error {
	if err := writeFile(textPath, func(w io.Writer) error { return Write(w, c, FormatText) }); err != nil {
		return err
	}
	return writeFile(labelsPath, func(w io.Writer) error { return Write(w, c, FormatLabels) })
}

func writeFile(path string, write func(io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	var w io.Writer = f
	if strings.HasSuffix(path, ".gz") {
		zw := gzip.NewWriter(f)
		defer func() {
			if cerr := zw.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
		w = zw
	}
	if err := write(w); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// checkSentence is the common validation of writers: tokens present and,
// for column formats, free of white space; tags one per token.
func checkSentence(i int, s Sentence, plainTokens bool) error {
	if len(s.Tokens) == 0 {
		return fmt.Errorf("sentence %d: no tokens", i+1)
	}
	if s.Tags != nil && len(s.Tags) != len(s.Tokens) {
		return fmt.Errorf("sentence %d: %d tokens but %d tags: %w", i+1, len(s.Tokens), len(s.Tags), ErrCountMismatch)
	}
	if plainTokens {
		for j, tok := range s.Tokens {
			if tok == "" || strings.IndexFunc(tok, unicode.IsSpace) >= 0 {
				return fmt.Errorf("sentence %d: token %d %q is empty or contains white space, which this format cannot hold", i+1, j+1, tok)
			}
		}
	}
	for j, tag := range s.Tags {
		if _, err := ParseTag(tag); err != nil {
			return fmt.Errorf("sentence %d: tag %d: %w", i+1, j+1, err)
		}
	}
	return nil
}

// errWriter lets encoders write many pieces and check once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) print(parts ...string) {
	for _, p := range parts {
		if e.err != nil {
			return
		}
		_, e.err = io.WriteString(e.w, p)
	}
}
