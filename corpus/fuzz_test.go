package corpus

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// fuzzRoundTrip checks, for any input, that a reader either fails with a
// *ParseError or returns a corpus that its writer writes and reads back
// unchanged.
func fuzzRoundTrip(f *testing.F, format Format, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := Read(bytes.NewReader(in), "fuzz", format)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		var out bytes.Buffer
		if err := Write(&out, c, format); err != nil {
			t.Fatalf("cannot write what was read: %v", err)
		}
		back, err := Read(&out, "fuzz-out", format)
		if err != nil {
			t.Fatalf("cannot read what was written: %v\n%s", err, out.String())
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip changed the corpus:\n%+v\n%+v", c.Sentences, back.Sentences)
		}
	})
}

func FuzzCoNLL(f *testing.F) {
	fuzzRoundTrip(f, FormatCoNLL,
		"-DOCSTART- -X- -X- O\n\nEU NNP B-ORG\nrejects VBZ O\n\nPeter B-PER\n",
		"a\nb\n\nc O\n",
		"a O\r\n\r\nb I-X\r\n",
		"a\tB-X\n-DOCSTART-\nb\tE-Y\n",
	)
}

func FuzzJSONL(f *testing.F) {
	fuzzRoundTrip(f, FormatJSONL,
		`{"tokens": ["a", "b"], "tags": ["B-X", "I-X"], "doc_start": true}`+"\n",
		`{"text": "Zoë visited New York", "spans": [{"start": 12, "end": 20, "label": "LOC"}]}`+"\n",
		`{"text": "x y", "spans": []}`+"\n\n"+`{"tokens": ["<b>&"]}`+"\n",
	)
}

func FuzzCK(f *testing.F) {
	fuzzRoundTrip(f, FormatCK,
		"<s> O None\nTricuspid I Disease\nvalve O Disease\nand I None\n<eof> I None\n\n",
		"-DOCSTART-\n\n<s> O None S\nx B Chemical S\ny O Chemical\n<eof> I None\n",
		"a I None\nb O None\n",
	)
}
