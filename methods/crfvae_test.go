package methods_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/train/crfvae"
)

// inputsOf lists a node's inputs as port<-source.
func inputsOf(n *spec.Node) map[string]string {
	out := map[string]string{}
	for _, in := range n.Inputs {
		out[in.Port] = in.Node + "." + in.Output + in.Dataset
	}
	return out
}

func paramsOf(t *testing.T, n *spec.Node) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(n.Params, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// The CRF-VAE trains on a labeled split of the train input with the rest
// as unlabeled text (or the unlabeled input); with partial, on the masked
// train input, which is also the unlabeled text, its O tags unobserved.
func TestCRFVAEGraph(t *testing.T) {
	dir := fixture(t)
	base := "method: crfvae\nparams:\n  generator: transformer\ninputs:\n  train: ../../data/test.conll\n  dev: ../../data/test.conll\n"
	g, err := expand(t, dir, base)
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := g.Node("train")
	if !ok || tr.Stage != crfvae.StageName {
		t.Fatalf("train node %+v", tr)
	}
	if ins := inputsOf(tr); ins["corpus"] != "split.labeled" || ins["unlabeled"] != "split.unlabeled" {
		t.Errorf("train reads %v, want the split's parts", ins)
	}
	if p := paramsOf(t, tr); p["generator"] != "transformer" || p["drop_o"] != 0.0 || p["head"] != "crf" || p["corpus_unlabeled"] != false {
		t.Errorf("train params %v", p)
	}
	split, _ := g.Node("split")
	if p := paramsOf(t, split); p["labeled"] != 0.1 || p["unlabeled_rest"] != true {
		t.Errorf("split params %v", p)
	}
	for _, n := range []string{"eval-train", "register"} {
		if _, ok := g.Node(n); !ok {
			t.Errorf("no node %s", n)
		}
	}

	g, err = expand(t, dir, base+"  unlabeled: ../../data/raw.txt\n")
	if err != nil {
		t.Fatal(err)
	}
	tr, _ = g.Node("train")
	split, _ = g.Node("split")
	if ins := inputsOf(tr); ins["corpus"] != "split.labeled" || !strings.HasSuffix(ins["unlabeled"], "raw.txt") {
		t.Errorf("with unlabeled text, train reads %v", ins)
	}
	if p := paramsOf(t, split); p["unlabeled"] != 0.0 || p["unlabeled_rest"] != false {
		t.Errorf("with unlabeled text, split params %v", p)
	}

	g, err = expand(t, dir, strings.Replace(base, "generator: transformer", "partial: 0.9", 1))
	if err != nil {
		t.Fatal(err)
	}
	tr, _ = g.Node("train")
	if p := paramsOf(t, tr); p["drop_o"] != 1.0 || p["corpus_unlabeled"] != true {
		t.Errorf("partial: train params %v", p)
	}
	if ins := inputsOf(tr); ins["corpus"] != "mask.masked" || ins["unlabeled"] != "" {
		t.Errorf("partial: train reads %v, want the masked corpus alone", ins)
	}
	mask, _ := g.Node("mask")
	if p := paramsOf(t, mask); p["p"] != 0.9 {
		t.Errorf("mask params %v", p)
	}
	if _, ok := g.Node("split"); ok {
		t.Error("partial: a split node")
	}

	for text, want := range map[string]string{
		strings.Replace(base, "generator: transformer", "partial: 0.9", 1) + "  unlabeled: ../../data/raw.txt\n": "with partial",
		strings.Replace(base, "generator: transformer", "labeled: 1", 1):                                         "connect unlabeled sentences",
		strings.Replace(base, "generator: transformer", "generator: lstm", 1):                                    `"lstm" is not one of factored, transformer`,
	} {
		if _, err := expand(t, dir, text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("spec:\n%s\nerror %v, want %s", text, err, want)
		}
	}
}
