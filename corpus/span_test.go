package corpus

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// spans writes "PER[0,2) LOC[3,4)" as []Span.
func spans(t *testing.T, s string) []Span {
	t.Helper()
	var out []Span
	for _, f := range strings.Fields(s) {
		var sp Span
		i := strings.IndexByte(f, '[')
		sp.Label = f[:i]
		if _, err := fmt.Sscanf(f[i:], "[%d,%d)", &sp.Start, &sp.End); err != nil {
			t.Fatalf("bad span %q: %v", f, err)
		}
		out = append(out, sp)
	}
	return out
}

// TestSpansConlleval pins the chunking of conlleval.pl (the version that
// knows E- and S-) on the sequences where schemes and sloppy taggers differ.
func TestSpansConlleval(t *testing.T) {
	cases := []struct{ tags, want string }{
		{"", ""},
		{"O O", ""},
		{"B-PER I-PER O", "PER[0,2)"},
		{"B-PER", "PER[0,1)"},
		{"O I-PER I-PER", "PER[1,3)"},                                // I- after O starts an entity
		{"I-PER", "PER[0,1)"},                                        // ... and so does I- at the start
		{"B-PER I-LOC", "PER[0,1) LOC[1,2)"},                         // I- of another type starts a new one
		{"I-PER I-LOC I-LOC", "PER[0,1) LOC[1,3)"},                   // IO / IOB1 type change
		{"I-PER I-PER B-PER", "PER[0,2) PER[2,3)"},                   // IOB1: B- splits adjacent same-type entities
		{"B-PER B-PER", "PER[0,1) PER[1,2)"},                         // B- after B- of the same type
		{"B-PER O I-PER", "PER[0,1) PER[2,3)"},                       // a gap splits
		{"I-PER B-LOC I-LOC", "PER[0,1) LOC[1,3)"},                   //
		{"B-PER I-PER E-PER S-PER", "PER[0,3) PER[3,4)"},             // BIOES
		{"B-PER E-PER I-PER E-PER", "PER[0,2) PER[2,4)"},             // I- after E- starts
		{"E-PER E-PER", "PER[0,1) PER[1,2)"},                         // E- after E- starts
		{"S-PER I-PER", "PER[0,1) PER[1,2)"},                         // I- after S- starts
		{"S-PER E-PER", "PER[0,1) PER[1,2)"},                         // E- after S- starts
		{"B-PER S-PER", "PER[0,1) PER[1,2)"},                         // S- always starts
		{"B-PER E-LOC", "PER[0,1) LOC[1,2)"},                         // type change
		{"O E-PER", "PER[1,2)"},                                      // E- after O starts
		{"B-PER I-PER I-PER", "PER[0,3)"},                            // an unfinished BIOES entity still counts
		{"B-ORG I-ORG O B-MISC I-MISC I-MISC", "ORG[0,2) MISC[3,6)"}, //
	}
	for _, c := range cases {
		got, err := AnyScheme.Spans(strings.Fields(c.tags))
		if err != nil {
			t.Fatalf("Spans(%q): %v", c.tags, err)
		}
		if want := spans(t, c.want); !slices.Equal(got, want) {
			t.Errorf("Spans(%q) = %v; want %v", c.tags, got, want)
		}
	}
	_, err := BIO.Spans([]string{"O", "B-A", "S-A"})
	if !errors.Is(err, ErrUnknownTag) || !strings.HasPrefix(err.Error(), "tag 3: ") {
		t.Errorf("BIO.Spans with S- = %v; want ErrUnknownTag at tag 3", err)
	}
}

func TestTags(t *testing.T) {
	in := spans(t, "PER[0,2) PER[2,3) LOC[4,5) ORG[5,8)")
	want := map[Scheme]string{
		BIO:   "B-PER I-PER B-PER O B-LOC B-ORG I-ORG I-ORG",
		IOB1:  "I-PER I-PER B-PER O I-LOC I-ORG I-ORG I-ORG",
		BIOES: "B-PER E-PER S-PER O S-LOC B-ORG I-ORG E-ORG",
	}
	for s, w := range want {
		got, err := s.Tags(in, 8)
		if err != nil || strings.Join(got, " ") != w {
			t.Errorf("%s.Tags = %q, %v; want %q", s, got, err, w)
		}
	}

	// IO cannot separate PER[0,2) from PER[2,3).
	if _, err := IO.Tags(in, 8); !errors.Is(err, ErrBoundaryLost) {
		t.Errorf("IO.Tags of adjacent same-type spans = %v; want ErrBoundaryLost", err)
	}
	got, err := IO.Tags(in, 8, MergeAdjacent())
	if w := "I-PER I-PER I-PER O I-LOC I-ORG I-ORG I-ORG"; err != nil || strings.Join(got, " ") != w {
		t.Errorf("IO.Tags(MergeAdjacent) = %q, %v; want %q", got, err, w)
	}

	// Order of the input does not matter; overlaps and bad ranges do.
	rev := slices.Clone(in)
	slices.Reverse(rev)
	if got, _ := BIO.Tags(rev, 8); strings.Join(got, " ") != want[BIO] {
		t.Errorf("BIO.Tags(reversed) = %q", got)
	}
	for _, bad := range []string{"A[0,2) B[1,3)", "A[2,2)", "A[-1,1)", "A[3,9)"} {
		if _, err := BIO.Tags(spans(t, bad), 8); !errors.Is(err, ErrSyntax) {
			t.Errorf("BIO.Tags(%s) = %v; want ErrSyntax", bad, err)
		}
	}
	if _, err := BIO.Tags([]Span{{0, 1, ""}}, 2); err == nil {
		t.Error("BIO.Tags accepted an empty label")
	}
	if _, err := AnyScheme.Tags(in, 8); err == nil {
		t.Error("AnyScheme.Tags succeeded")
	}
}

// TestConvertLossless converts random well-formed span sets through every
// pair of BIO, IOB1 and BIOES and back.
func TestConvertLossless(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lossless := []Scheme{BIO, IOB1, BIOES}
	for trial := range 500 {
		n := 1 + rng.IntN(12)
		var sp []Span
		for i := 0; i < n; {
			if rng.IntN(3) == 0 {
				i++
				continue
			}
			end := min(n, i+1+rng.IntN(3))
			sp = append(sp, Span{Start: i, End: end, Label: []string{"A", "B"}[rng.IntN(2)]})
			i = end
		}
		for _, from := range lossless {
			tags, err := from.Tags(sp, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := from.Validate(tags); err != nil {
				t.Fatalf("trial %d: %s.Tags(%v) gave invalid %q: %v", trial, from, sp, tags, err)
			}
			for _, to := range lossless {
				conv, err := Convert(tags, from, to)
				if err != nil {
					t.Fatal(err)
				}
				back, err := Convert(conv, to, from)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(back, tags) {
					t.Fatalf("trial %d: %q %s->%s->%s gave %q", trial, tags, from, to, from, back)
				}
				got, _ := to.Spans(conv)
				if !slices.Equal(got, sp) && !(len(got) == 0 && len(sp) == 0) {
					t.Fatalf("trial %d: spans of %q = %v; want %v", trial, conv, got, sp)
				}
			}
		}
	}
}

func TestConvertIO(t *testing.T) {
	bio := strings.Fields("B-A I-A B-A O B-B")
	if _, err := Convert(bio, BIO, IO); !errors.Is(err, ErrBoundaryLost) {
		t.Fatalf("BIO->IO over adjacent entities = %v; want ErrBoundaryLost", err)
	}
	io, err := Convert(bio, BIO, IO, MergeAdjacent())
	if w := "I-A I-A I-A O I-B"; err != nil || strings.Join(io, " ") != w {
		t.Fatalf("BIO->IO = %q, %v; want %q", io, err, w)
	}
	back, err := Convert(io, IO, BIO)
	if w := "B-A I-A I-A O B-B"; err != nil || strings.Join(back, " ") != w {
		t.Fatalf("IO->BIO = %q, %v; want %q (one merged entity)", back, err, w)
	}
	// Without adjacent same-type entities IO round-trips.
	bio = strings.Fields("B-A I-A B-B O B-A")
	io, err = Convert(bio, BIO, IO)
	if err != nil {
		t.Fatal(err)
	}
	if back, _ := Convert(io, IO, BIO); !slices.Equal(back, bio) {
		t.Errorf("IO round trip %q -> %q -> %q", bio, io, back)
	}
	// Malformed input comes out repaired the conlleval way.
	fixed, err := Convert(strings.Fields("O I-A I-A I-B"), BIO, BIO)
	if w := "O B-A I-A B-B"; err != nil || strings.Join(fixed, " ") != w {
		t.Errorf("BIO->BIO repair = %q, %v; want %q", fixed, err, w)
	}
}

func TestCorpusConvert(t *testing.T) {
	c := &Corpus{Sentences: []Sentence{
		{Tokens: []string{"a", "b"}, Tags: []string{"B-X", "I-X"}},
		{Tokens: []string{"c"}},
		{Tokens: []string{"d", "e"}, Tags: []string{"B-X", "B-X"}},
	}}
	err := c.Convert(BIO, IO)
	if !errors.Is(err, ErrBoundaryLost) || !strings.HasPrefix(err.Error(), "sentence 3: ") {
		t.Fatalf("Convert = %v; want ErrBoundaryLost in sentence 3", err)
	}
	if c.Sentences[0].Tags[0] != "B-X" {
		t.Fatal("a failed Convert changed the corpus")
	}
	if err := c.Convert(BIO, BIOES); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(c.Sentences[0].Tags, c.Sentences[1].Tags, c.Sentences[2].Tags)
	if want := "[B-X E-X] [] [S-X S-X]"; got != want {
		t.Errorf("after Convert: %s; want %s", got, want)
	}
}
