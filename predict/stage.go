package predict

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// StageEntities is the stage that does over a corpus what POST /v1/predict
// does over a request.
const StageEntities = "predict.entities"

// EntitiesFile is the file of the stage's output: one JSON line per input
// line (raw text) or sentence (tokenized input).
const EntitiesFile = "entities.jsonl"

// chunk is how many lines are tagged between two progress reports.
const chunk = 256

func init() {
	stages.Register(stages.Stage{
		Name:    StageEntities,
		Version: 1,
		Doc: "Finds the entities of a corpus with a trained tagger, as nerflow serve's POST /v1/predict does: " +
			"raw text (one text per line, tokenized like CoNLL-2003) or tokenized sentences in; per line the " +
			"entity spans with type, offsets and confidence out.",
		Params: []stages.Param{
			stages.StringParam("file", "", "file of the text artifact to read (empty: its only file)"),
			stages.BoolParam("tokenized", false, "the file is a tokenized corpus in a corpus format (else raw text, one text per line)"),
			stages.StringParam("format", "", "corpus format of a tokenized file (empty: from its name)"),
			stages.IntParam("batch_size", 64, "sentences per forward pass", stages.Range(1, 4096)),
		},
		Inputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: "a tagger from " + tagger.StageTrain},
			{Name: "text", Kind: "corpus", Doc: "the texts to tag"},
		},
		Outputs: []stages.Port{
			{Name: "entities", Kind: "entities", Doc: EntitiesFile + `: per line {"line", "text", "tokens", "entities": [{type, text, start, end, token_start, token_end, confidence}]}`},
		},
		Run: runEntitiesStage,
	})
}

// line is one line of EntitiesFile.
type line struct {
	Line     int      `json:"line"`
	Text     string   `json:"text,omitempty"`
	Tokens   any      `json:"tokens"`
	Entities []Entity `json:"entities"`
}

func runEntitiesStage(c *stages.Context) error {
	device, err := tagger.ParseDevice(c.Device)
	if err != nil {
		return err
	}
	m, err := LoadInput(c.Input("model"), device, Info{})
	if err != nil {
		return stages.Permanent(err)
	}
	defer m.Close()
	in := c.Input("text")
	name := c.Params.String("file")
	if name == "" {
		if len(in.Files) != 1 {
			return stages.Permanent(fmt.Errorf("input text has %d files: name the one to read with the param file", len(in.Files)))
		}
		name = in.Files[0].Name
	}
	rc, err := in.Open(name)
	if err != nil {
		return stages.Permanent(fmt.Errorf("input text: %w", err))
	}
	defer rc.Close()
	reqs, err := readRequests(rc, name, c.Params.Bool("tokenized"), corpus.Format(c.Params.String("format")))
	if err != nil {
		return stages.Permanent(err)
	}
	out := c.Output("entities")
	out.SetMeta("model", c.Input("model").Digest)
	w, err := out.Create(EntitiesFile)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	total, entities := len(reqs.lines), 0
	for start := 0; start < total; start += chunk {
		if err := c.Err(); err != nil {
			w.Close()
			return err
		}
		end := min(start+chunk, total)
		req := reqs.slice(start, end)
		resp, err := m.Annotate(req, c.Params.Int("batch_size"))
		if err != nil {
			w.Close()
			return err
		}
		for i, r := range resp.Results {
			l := line{Line: reqs.lines[start+i], Entities: r.Entities}
			if req.Texts != nil {
				l.Text, l.Tokens = req.Texts[i], r.Tokens
			} else {
				l.Tokens = req.Sentences[i]
			}
			entities += len(r.Entities)
			if err := enc.Encode(l); err != nil {
				w.Close()
				return err
			}
		}
		c.Progress(int64(end), int64(total), fmt.Sprintf("%d entities", entities))
	}
	if err := bw.Flush(); err != nil {
		w.Close()
		return err
	}
	c.Log.Info("tagged", "lines", total, "entities", entities)
	return w.Close()
}

// requests are the input's texts or sentences with their line numbers.
type requests struct {
	texts     []string
	sentences [][]string
	lines     []int
}

func (r requests) slice(i, j int) Request {
	if r.texts != nil {
		return Request{Texts: r.texts[i:j]}
	}
	return Request{Sentences: r.sentences[i:j]}
}

// readRequests reads raw text, one text per non-blank line, or a tokenized
// corpus.
func readRequests(r io.Reader, name string, tokenized bool, format corpus.Format) (requests, error) {
	var out requests
	if tokenized {
		c, err := dataset.ReadCorpus(r, name, format)
		if err != nil {
			return out, fmt.Errorf("input text: %w", err)
		}
		out.sentences = [][]string{}
		for i, s := range c.Sentences {
			out.sentences = append(out.sentences, s.Tokens)
			out.lines = append(out.lines, i+1)
		}
		return out, nil
	}
	out.texts = []string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		out.texts = append(out.texts, sc.Text())
		out.lines = append(out.lines, n)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}
