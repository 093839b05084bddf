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

// The CRF-VAE trains on the labeled train input with the unlabeled input
// as the ELBO's sentences; with partial, the train input is both, its O
// tags unobserved.
func TestCRFVAEGraph(t *testing.T) {
	dir := fixture(t)
	base := "method: crfvae\nparams:\n  generator: transformer\ninputs:\n  train: ../../data/test.conll\n  dev: ../../data/test.conll\n"
	g, err := expand(t, dir, base+"  unlabeled: ../../data/raw.txt\n")
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := g.Node("train")
	if !ok || tr.Stage != crfvae.StageName {
		t.Fatalf("train node %+v", tr)
	}
	if ins := inputsOf(tr); !strings.HasSuffix(ins["unlabeled"], "raw.txt") || ins["embeddings"] != "" {
		t.Errorf("train reads %v, want the unlabeled input", ins)
	}
	if p := paramsOf(t, tr); p["generator"] != "transformer" || p["drop_o"] != 0.0 || p["head"] != "crf" {
		t.Errorf("train params %v", p)
	}
	for _, n := range []string{"evaluate", "register"} {
		if _, ok := g.Node(n); !ok {
			t.Errorf("no node %s", n)
		}
	}

	g, err = expand(t, dir, strings.Replace(base, "generator: transformer", "partial: true", 1))
	if err != nil {
		t.Fatal(err)
	}
	tr, _ = g.Node("train")
	if p := paramsOf(t, tr); p["drop_o"] != 1.0 {
		t.Errorf("partial: drop_o %v, want 1", p["drop_o"])
	}
	if ins := inputsOf(tr); !strings.HasSuffix(ins["corpus"], "test.conll") || ins["corpus"] != ins["unlabeled"] {
		t.Errorf("partial: train reads %v, want the train input as corpus and unlabeled", ins)
	}

	for text, want := range map[string]string{
		base: "inputs.unlabeled: connect the unlabeled sentences",
		strings.Replace(base, "generator: transformer", "partial: true", 1) + "  unlabeled: ../../data/raw.txt\n":   "with partial",
		strings.Replace(base, "generator: transformer", "generator: lstm", 1) + "  unlabeled: ../../data/raw.txt\n": `"lstm" is not one of factored, transformer`,
	} {
		if _, err := expand(t, dir, text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("spec:\n%s\nerror %v, want %s", text, err, want)
		}
	}
}
