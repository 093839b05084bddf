package subset

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
)

// writeTagged writes a tagged corpus to out as base.EXT in format, with the
// format and scheme recorded so that consumers read it as written.
func writeTagged(out *stages.Output, base string, c *corpus.Corpus, format corpus.Format, scheme corpus.Scheme) error {
	dataset.Describe(out, format, scheme)
	return writeCorpus(out, base+"."+strings.TrimSuffix(string(format), "-spans"), c, format)
}

func writeCorpus(out *stages.Output, name string, c *corpus.Corpus, format corpus.Format) error {
	var b bytes.Buffer
	if err := corpus.Write(&b, c, format); err != nil {
		return stages.Permanent(fmt.Errorf("writing %s: %w", name, err))
	}
	return out.WriteFile(name, b.Bytes())
}

// writeReport writes a stage's report twice: report.json for programs,
// report.txt, its table, for people.
func writeReport(out *stages.Output, rep interface{ WriteText(io.Writer) error }) error {
	var txt bytes.Buffer
	if err := rep.WriteText(&txt); err != nil {
		return err
	}
	if err := out.WriteJSON("report.json", rep); err != nil {
		return err
	}
	return out.WriteFile("report.txt", txt.Bytes())
}
