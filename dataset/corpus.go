package dataset

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/stages"
)

// Source says what a corpus input is: the file holding the sentences, an
// optional labels file parallel to it (a text file with one sentence per
// line and a labels file with its tags, as CoNLL-2003's train_text.txt and
// train_label_dist.txt), and the format of File (empty: from its name).
type Source struct {
	File   string
	Labels string
	Format corpus.Format
}

// Meta keys by which a corpus artifact says what it holds, set by the
// stage that writes it (Describe): readers take the format from it when
// no parameter names one, so that a stage's output is read as written
// without every consumer repeating it.
const (
	MetaFormat = "format"
	MetaScheme = "scheme"
)

// MetaLabels names which labels a corpus artifact holds where a stage
// tells sets of labels of the same sentences apart (refine's given and
// refined); a stage that adds to a corpus's labels keeps the name.
const MetaLabels = "labels"

// Describe records on a stage's corpus output the format of its corpus
// file and the scheme of its tags.
func Describe(out *stages.Output, format corpus.Format, scheme corpus.Scheme) {
	out.SetMeta(MetaFormat, string(format))
	out.SetMeta(MetaScheme, scheme.String())
}

// Parameter suffixes of a corpus port: port "corpus" has the parameters
// corpus_file, corpus_labels and corpus_format.
const (
	fileSuffix   = "_file"
	labelsSuffix = "_labels"
	formatSuffix = "_format"
)

// SourceParams declares the parameters that describe the corpus read from
// the input port of a stage; what says what the sentences are for.
func SourceParams(port, what string) []stages.Param {
	return []stages.Param{
		stages.StringParam(port+fileSuffix, "", "file of the "+port+" artifact holding the "+what+" (empty: its only file)"),
		stages.StringParam(port+labelsSuffix, "", "labels file of the "+port+" artifact, parallel to "+port+fileSuffix+" (empty: tags, if any, come with the sentences)"),
		stages.StringParam(port+formatSuffix, "", "format of "+port+fileSuffix+": "+strings.Join(corpus.Formats(), ", ")+" (empty: from its name)", stages.OneOf(append([]string{""}, corpus.Formats()...)...)),
	}
}

// SourceOf reads the parameters SourceParams declared for port.
func SourceOf(p stages.Params, port string) Source {
	return Source{File: p.String(port + fileSuffix), Labels: p.String(port + labelsSuffix), Format: corpus.Format(p.String(port + formatSuffix))}
}

// format is the format of s.File, given or detected from its name.
func (s Source) format() (corpus.Format, error) {
	if s.Labels != "" && s.Format == "" {
		return corpus.FormatText, nil
	}
	if s.Format != "" {
		return corpus.ParseFormat(string(s.Format))
	}
	return corpus.DetectFormat(s.File)
}

// ReadFile reads the corpus from local files, with options of package
// corpus (a scheme, types) for the readers.
func (s Source) ReadFile(opts ...corpus.Option) (*corpus.Corpus, error) {
	if s.Format != "" {
		f, err := corpus.ParseFormat(string(s.Format))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.File, err)
		}
		if s.Labels != "" && f != corpus.FormatText {
			return nil, fmt.Errorf("%s: a labels file goes with a text file, not with format %s", s.File, f)
		}
		opts = append(opts, corpus.WithFormat(f))
	}
	if s.Labels != "" {
		return corpus.ReadTextLabels(s.File, s.Labels, opts...)
	}
	return corpus.ReadFile(s.File, opts...)
}

// ReadInput reads the corpus of a stage's input port, described by the
// parameters SourceParams declared. Bad input is a permanent error (a retry
// would read the same files).
func ReadInput(in *stages.Input, p stages.Params, port string) (*corpus.Corpus, error) {
	return SourceOf(p, port).ReadFrom(in, port)
}

// ReadFrom reads the corpus from the artifact of a stage's input port
// (File empty: the artifact's only file). Bad input is a permanent error.
func (s Source) ReadFrom(in *stages.Input, port string) (*corpus.Corpus, error) {
	c, err := s.read(in, port)
	if err != nil {
		return nil, stages.Permanent(fmt.Errorf("input %s: %w", port, err))
	}
	return c, nil
}

func (s Source) read(in *stages.Input, port string) (*corpus.Corpus, error) {
	if s.File == "" {
		if len(in.Files) != 1 {
			return nil, fmt.Errorf("the artifact has %d files (%s); name the one to read with the param %s%s", len(in.Files), fileNames(in), port, fileSuffix)
		}
		s.File = in.Files[0].Name
	}
	if s.Format == "" && s.Labels == "" && len(in.Files) == 1 && s.File == in.Files[0].Name {
		s.Format = corpus.Format(in.Meta[MetaFormat]) // as its producer wrote it, if it said
	}
	f, err := s.format()
	if err != nil {
		return nil, err
	}
	rc, err := in.Open(s.File)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var opts []corpus.Option
	if s.Labels != "" {
		lr, err := in.Open(s.Labels)
		if err != nil {
			return nil, err
		}
		defer lr.Close()
		opts = append(opts, corpus.WithLabels(lr, s.Labels))
	}
	return corpus.Read(rc, s.File, f, opts...)
}

func fileNames(in *stages.Input) string {
	names := make([]string, len(in.Files))
	for i, f := range in.Files {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// ScanTags opens a file of tags alone for streaming: in format, if given,
// else detected from its name, with .txt read as a labels file (a text
// file alone holds no tags).
func ScanTags(path string, format corpus.Format, opts ...corpus.Option) (*corpus.Scanner, error) {
	var err error
	switch ext := strings.ToLower(filepath.Ext(strings.TrimSuffix(path, ".gz"))); {
	case format != "":
		format, err = corpus.ParseFormat(string(format))
	case ext == ".txt":
		format = corpus.FormatLabels
	default:
		format, err = corpus.DetectFormat(path)
	}
	if err != nil {
		return nil, err
	}
	return corpus.ScanFile(path, append(slices.Clip(opts), corpus.WithFormat(format))...)
}

// ReadCorpus reads a corpus from r, a file called name, in format (empty:
// from the name).
func ReadCorpus(r io.Reader, name string, format corpus.Format) (*corpus.Corpus, error) {
	f, err := Source{File: name, Format: format}.format()
	if err != nil {
		return nil, err
	}
	return corpus.Read(r, name, f)
}
