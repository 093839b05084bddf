package corpus

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestParseScheme(t *testing.T) {
	for name, want := range map[string]Scheme{"io": IO, "BIO": BIO, "iob2": BIO, "iob1": IOB1, "bioes": BIOES, "IOBES": BIOES} {
		got, err := ParseScheme(name)
		if err != nil || got != want {
			t.Errorf("ParseScheme(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := ParseScheme("bilou"); err == nil {
		t.Error("ParseScheme(bilou) succeeded")
	}
	if BIO.String() != "bio" || AnyScheme.String() != "any" {
		t.Errorf("String: %s %s", BIO, AnyScheme)
	}
}

func TestParseTag(t *testing.T) {
	good := map[string]Tag{
		"O":            {Prefix: 'O'},
		"B-PER":        {Prefix: 'B', Type: "PER"},
		"I-PER":        {Prefix: 'I', Type: "PER"},
		"E-Disease":    {Prefix: 'E', Type: "Disease"},
		"S-X":          {Prefix: 'S', Type: "X"},
		"B-GPE-ORG":    {Prefix: 'B', Type: "GPE-ORG"}, // the type is all after the first hyphen
		"I-Straße":     {Prefix: 'I', Type: "Straße"},
		"B-Chemical,D": {Prefix: 'B', Type: "Chemical,D"},
	}
	for in, want := range good {
		got, err := ParseTag(in)
		if err != nil || got != want {
			t.Errorf("ParseTag(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("Tag(%q).String() = %q", in, got.String())
		}
	}
	bad := map[string]string{
		"":        "unknown tag",
		"B-":      "missing entity type",
		"PER":     "want O or a prefix",
		"o":       "want O or a prefix",
		"X-PER":   `prefix "X"`,
		"B_PER":   "want O or a prefix",
		"B-A B":   "white space",
		"BI-PER":  "want O or a prefix",
		"B-\tPER": "white space",
	}
	for in, msg := range bad {
		_, err := ParseTag(in)
		if !errors.Is(err, ErrUnknownTag) || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseTag(%q) error = %v; want ErrUnknownTag mentioning %q", in, err, msg)
		}
	}
}

func TestSchemePrefixes(t *testing.T) {
	cases := []struct {
		s          Scheme
		ok, reject []string
	}{
		{IO, []string{"O", "I-A"}, []string{"B-A", "E-A", "S-A"}},
		{BIO, []string{"O", "B-A", "I-A"}, []string{"E-A", "S-A"}},
		{IOB1, []string{"O", "B-A", "I-A"}, []string{"E-A", "S-A"}},
		{BIOES, []string{"O", "B-A", "I-A", "E-A", "S-A"}, nil},
		{AnyScheme, []string{"O", "B-A", "I-A", "E-A", "S-A"}, nil},
	}
	for _, c := range cases {
		for _, tag := range c.ok {
			if _, err := c.s.ParseTag(tag); err != nil {
				t.Errorf("%s rejects %q: %v", c.s, tag, err)
			}
		}
		for _, tag := range c.reject {
			_, err := c.s.ParseTag(tag)
			if !errors.Is(err, ErrUnknownTag) || !strings.Contains(err.Error(), "scheme has no") {
				t.Errorf("%s.ParseTag(%q) = %v; want an unknown-prefix error", c.s, tag, err)
			}
		}
	}
	err := BIO.CheckTags([]string{"O", "B-A", "E-A"})
	if err == nil || !strings.HasPrefix(err.Error(), "tag 3: ") {
		t.Errorf("CheckTags error = %v; want it to name tag 3", err)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		s    Scheme
		tags string
		bad  int // 1-based index of the first invalid tag, 0 if valid
	}{
		{BIO, "B-A I-A O B-B B-B I-B", 0},
		{BIO, "O I-A", 2},
		{BIO, "B-A I-B", 2},
		{BIO, "I-A", 1},
		{IOB1, "I-A I-A B-A O I-B", 0},
		{IOB1, "B-A", 1},       // B only between two entities of one type
		{IOB1, "I-A B-B", 2},   // ... of the same type
		{IOB1, "O B-A I-A", 2}, // not after O
		{IO, "I-A I-A I-B O I-A", 0},
		{BIOES, "B-A I-A E-A S-A O S-B", 0},
		{BIOES, "B-A O", 1},
		{BIOES, "B-A I-A", 2},
		{BIOES, "O E-A", 2},
		{BIOES, "O I-A E-A", 2},
		{BIOES, "B-A E-B", 1},
		{AnyScheme, "I-A E-B O S-C", 0},
		{BIO, "", 0},
	}
	for _, c := range cases {
		err := c.s.Validate(strings.Fields(c.tags))
		if c.bad == 0 {
			if err != nil {
				t.Errorf("%s.Validate(%q) = %v; want nil", c.s, c.tags, err)
			}
			continue
		}
		want := "tag " + strconv.Itoa(c.bad) + ": "
		if !errors.Is(err, ErrInvalidSequence) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s.Validate(%q) = %v; want ErrInvalidSequence at %q", c.s, c.tags, err, want)
		}
	}
	if err := BIO.Validate([]string{"B-A", "S-A"}); !errors.Is(err, ErrUnknownTag) {
		t.Errorf("Validate with a foreign prefix = %v; want ErrUnknownTag", err)
	}
}
