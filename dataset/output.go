package dataset

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/stages"
)

// WriteTagged writes a tagged corpus to a stage's output as base.EXT in
// format, with the format and scheme recorded (Describe) so that consumers
// read it as written.
func WriteTagged(out *stages.Output, base string, c *corpus.Corpus, format corpus.Format, scheme corpus.Scheme) error {
	Describe(out, format, scheme)
	return WriteCorpus(out, base+"."+strings.TrimSuffix(string(format), "-spans"), c, format)
}

// WriteCorpus writes a corpus to a stage's output as the file name, in
// format, without describing the artifact.
func WriteCorpus(out *stages.Output, name string, c *corpus.Corpus, format corpus.Format) error {
	var b bytes.Buffer
	if err := corpus.Write(&b, c, format); err != nil {
		return stages.Permanent(fmt.Errorf("writing %s: %w", name, err))
	}
	return out.WriteFile(name, b.Bytes())
}

// WriteReport writes a stage's report twice: report.json for programs,
// report.txt, its table, for people.
func WriteReport(out *stages.Output, rep interface{ WriteText(io.Writer) error }) error {
	var txt bytes.Buffer
	if err := rep.WriteText(&txt); err != nil {
		return err
	}
	if err := out.WriteJSON("report.json", rep); err != nil {
		return err
	}
	return out.WriteFile("report.txt", txt.Bytes())
}
