package lm

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// fixture is a tiny text with a regular structure a language model learns
// in a few epochs.
var fixture = [][]string{
	strings.Fields("the cat sat on the mat ."),
	strings.Fields("the dog sat on the rug ."),
	strings.Fields("a cat ate the fish ."),
	strings.Fields("a dog ate the bone ."),
	strings.Fields("the cat saw a dog ."),
	strings.Fields("the dog saw a cat ."),
}

func tinyModel(t *testing.T, sents [][]string, hidden int) *Model {
	t.Helper()
	m, err := New(Config{Dim: 4, Hidden: hidden, Layers: 1}, NewVocab(sents, 0, 1), 7, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// values copies a weight to the host.
func values(t *testing.T, x *ts.Tensor) []float64 {
	t.Helper()
	var v []float32
	if err := kit.Guard(func() { v = kit.Float32s(x) }); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(v))
	for i, f := range v {
		out[i] = float64(f)
	}
	return out
}

// referenceNLL computes direction d's summed negative log-likelihood of a
// sentence by hand from the weights: the LSTM cell as PyTorch defines it
// (gates i, f, g, o), then a softmax over the vocabulary.
func referenceNLL(t *testing.T, m *Model, words []string, d int) float64 {
	t.Helper()
	ids := m.Vocab.ids(words)
	if d == Backward {
		slices.Reverse(ids)
	}
	inputs := append([]int64{Boundary}, ids...)
	targets := append(slices.Clone(ids), Boundary)
	H, D, V := m.Config.Hidden, m.Config.Dim, m.Vocab.Len()
	emb := values(t, m.emb)
	wih, whh := values(t, m.lstm[d][0][0]), values(t, m.lstm[d][0][1])
	bih, bhh := values(t, m.lstm[d][0][2]), values(t, m.lstm[d][0][3])
	outW, outB := values(t, m.outW), values(t, m.outB)
	sigmoid := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	h, c := make([]float64, H), make([]float64, H)
	nll := 0.0
	for step, in := range inputs {
		x := emb[int(in)*D : int(in+1)*D]
		gates := make([]float64, 4*H)
		for r := range 4 * H {
			s := bih[r] + bhh[r]
			for k := range D {
				s += wih[r*D+k] * x[k]
			}
			for k := range H {
				s += whh[r*H+k] * h[k]
			}
			gates[r] = s
		}
		for k := range H {
			i, f := sigmoid(gates[k]), sigmoid(gates[H+k])
			g, o := math.Tanh(gates[2*H+k]), sigmoid(gates[3*H+k])
			c[k] = f*c[k] + i*g
			h[k] = o * math.Tanh(c[k])
		}
		logits := make([]float64, V)
		for v := range V {
			logits[v] = outB[v]
			for k := range H {
				logits[v] += h[k] * outW[k*V+v]
			}
		}
		maxv := slices.Max(logits)
		z := 0.0
		for _, l := range logits {
			z += math.Exp(l - maxv)
		}
		nll -= logits[targets[step]] - maxv - math.Log(z)
	}
	return nll
}

// TestLossIsHandComputedCrossEntropy: the training loss of a batch of two
// sentences is the mean over both directions of the mean cross entropy per
// target, computed by hand.
func TestLossIsHandComputedCrossEntropy(t *testing.T) {
	m := tinyModel(t, fixture, 3)
	sents := [][]string{fixture[0], {"dog", "unseen-word"}}
	var want, count float64
	for _, s := range sents {
		want += referenceNLL(t, m, s, Forward) + referenceNLL(t, m, s, Backward)
		count += float64(len(s) + 1)
	}
	want /= 2 * count
	var got float64
	g := kit.NewGraph(m.device)
	defer g.Free()
	err := kit.Guard(func() {
		b := newBatch([][]int64{m.Vocab.ids(sents[0]), m.Vocab.ids(sents[1])})
		got = float64(kit.Float32s(m.loss(g, b, false, nil))[0])
	})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-want) > 1e-5 {
		t.Errorf("loss %.7f, hand-computed %.7f", got, want)
	}
}

// TestPerplexityIsExpMeanNLL: perplexity is exp of the mean negative
// log-likelihood per target (words and sentence ends), per direction.
func TestPerplexityIsExpMeanNLL(t *testing.T) {
	m := tinyModel(t, fixture, 3)
	text := [][]string{fixture[2], {}, fixture[5]}
	var nll [2]float64
	n := 0
	for _, s := range text {
		if len(s) == 0 {
			continue
		}
		n += len(s) + 1
		for d := range 2 {
			nll[d] += referenceNLL(t, m, s, d)
		}
	}
	p, err := m.Perplexity(text, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tokens != n {
		t.Errorf("%d targets, want %d", p.Tokens, n)
	}
	for d, got := range []float64{p.Forward, p.Backward} {
		if want := math.Exp(nll[d] / float64(n)); math.Abs(got-want) > 1e-4*want {
			t.Errorf("%s perplexity %.6f, want %.6f", dirNames[d], got, want)
		}
	}
}

// TestCombine: the masked-word distribution is the renormalized product of
// the two directions' distributions, the reserved ids excluded.
func TestCombine(t *testing.T) {
	// ids 0, 1 reserved; words 2, 3, 4.
	pf := []float64{0.1, 0.1, 0.4, 0.2, 0.2}
	pb := []float64{0.3, 0.1, 0.1, 0.3, 0.2}
	var lf, lb []float32
	for i := range pf {
		lf, lb = append(lf, float32(math.Log(pf[i]))), append(lb, float32(math.Log(pb[i])))
	}
	// products 0.04, 0.06, 0.04 over the words: 0.04/0.14, 0.06/0.14, 0.04/0.14.
	want := []float64{0, 0, 2.0 / 7, 3.0 / 7, 2.0 / 7}
	got := Combine(lf, lb)
	for i := range want {
		if p := math.Exp(got[i]); math.Abs(p-want[i]) > 1e-6 {
			t.Errorf("p(%d) = %.7f, want %.7f", i, p, want[i])
		}
	}
}

// TestMaskedLogProbsCombineBothSides: the masked distribution at a
// position combines the forward model's prediction from the left words
// with the backward model's from the right words: changing the word at the
// position itself changes nothing, changing a neighbour does.
func TestMaskedLogProbsCombineBothSides(t *testing.T) {
	m := tinyModel(t, fixture, 5)
	s := fixture[0]
	other := slices.Clone(s)
	other[2] = "ate"
	neighbour := slices.Clone(s)
	neighbour[3] = "saw"
	got, err := m.MaskedLogProbs([][]string{s, other, neighbour}, []Masked{{0, 2}, {1, 2}, {2, 2}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0], got[1]) {
		t.Error("the masked word itself changed its distribution")
	}
	if slices.Equal(got[0], got[2]) {
		t.Error("the right neighbour did not change the distribution")
	}
	total := 0.0
	for _, x := range got[0] {
		total += math.Exp(x)
	}
	if math.Abs(total-1) > 1e-9 {
		t.Errorf("probabilities sum to %v", total)
	}
	if _, err := m.MaskedLogProbs([][]string{s}, []Masked{{0, 7}}, 1); err == nil {
		t.Error("a position outside the sentence was accepted")
	}
}

// TestStatesAreCausal: a token's forward state depends on the words up to
// it only, its backward state on the words from it to the end.
func TestStatesAreCausal(t *testing.T) {
	m := tinyModel(t, fixture, 3)
	s := fixture[0]
	fwd, bwd, err := m.States([][]string{s, {}, s[:3], s[2:]}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(fwd[0]) != len(s) || len(fwd[1]) != 0 || len(bwd[3]) != len(s)-2 || len(fwd[0][0]) != 3 {
		t.Fatalf("shapes: %d %d %d %d", len(fwd[0]), len(fwd[1]), len(bwd[3]), len(fwd[0][0]))
	}
	if !slices.Equal(fwd[0][2], fwd[2][2]) {
		t.Errorf("forward state of token 3 differs with the words after it: %v %v", fwd[0][2], fwd[2][2])
	}
	if !slices.Equal(bwd[0][2], bwd[3][0]) {
		t.Errorf("backward state of token 3 differs with the words before it: %v %v", bwd[0][2], bwd[3][0])
	}
}

// TestTinyModelLearns: training lowers the loss and the held-out
// perplexity on the fixture.
func TestTinyModelLearns(t *testing.T) {
	m := tinyModel(t, fixture, 16)
	before, err := m.Perplexity(fixture[:2], 8)
	if err != nil {
		t.Fatal(err)
	}
	cfg := TrainConfig{Epochs: 30, BatchSize: 2, LearningRate: 0.02, MaxGradNorm: 5, MaxLen: 20, Seed: 3}
	hist, err := Train(context.Background(), m, fixture, fixture[:2], cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	first, last := hist[0], hist[len(hist)-1]
	if last.TrainLoss >= first.TrainLoss/2 {
		t.Errorf("loss %.3f after %d epochs, %.3f after the first", last.TrainLoss, len(hist), first.TrainLoss)
	}
	if last.Heldout.Forward >= before.Forward/2 || last.Heldout.Backward >= before.Backward/2 {
		t.Errorf("perplexity %+v, before training %+v", *last.Heldout, before)
	}
}

// TestSaveLoadRoundTrip: a loaded model has the saved weights and
// vocabulary, and predicts the same.
func TestSaveLoadRoundTrip(t *testing.T) {
	m := tinyModel(t, fixture, 3)
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	l, err := Load(dir, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !slices.Equal(l.Vocab.Words, m.Vocab.Words) || l.Config != m.Config || l.Vocab.ID("cat") != m.Vocab.ID("cat") {
		t.Fatal("vocabulary or config differ")
	}
	names, a := m.parameters()
	_, b := l.parameters()
	for i := range a {
		if !slices.Equal(values(t, a[i]), values(t, b[i])) {
			t.Errorf("weight %s differs", names[i])
		}
	}
	os.WriteFile(filepath.Join(dir, ModelFile), []byte(`{"format":9}`), 0o644)
	if _, err := Load(dir, gotch.CPU); err == nil || !strings.Contains(err.Error(), "format 9") {
		t.Errorf("a model of another format: %v", err)
	}
}

// TestResumeContinuesExactly: a run resumed from the checkpoint of its
// first epoch ends with the weights of the uninterrupted run, bit for bit.
func TestResumeContinuesExactly(t *testing.T) {
	cfg := TrainConfig{Epochs: 2, BatchSize: 2, LearningRate: 0.01, MaxGradNorm: 5, MaxLen: 20, Seed: 3}
	whole := tinyModel(t, fixture, 4)
	if _, err := Train(context.Background(), whole, fixture, nil, cfg, Options{}); err != nil {
		t.Fatal(err)
	}

	saved := t.TempDir()
	first := tinyModel(t, fixture, 4)
	_, err := Train(context.Background(), first, fixture, nil, cfg, Options{StateDir: t.TempDir(), Checkpoint: func(dir string, epoch int) error {
		if epoch == 1 {
			return os.CopyFS(saved, os.DirFS(dir))
		}
		return context.Canceled // the worker dies after epoch 1
	}})
	if err == nil {
		t.Fatal("the interrupted run succeeded")
	}
	resumed := tinyModel(t, fixture, 4)
	hist, err := Train(context.Background(), resumed, fixture, nil, cfg, Options{StateDir: saved, Resume: saved})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Epoch != 1 {
		t.Errorf("history %+v", hist)
	}
	names, a := whole.parameters()
	_, b := resumed.parameters()
	for i := range a {
		if !slices.Equal(values(t, a[i]), values(t, b[i])) {
			t.Errorf("weight %s of the resumed run differs", names[i])
		}
	}
}

func TestReadBrown(t *testing.T) {
	text := "\n\n\tThe/at jury/nn said/vbd ``/`` 1/2/cd ''/'' ./.\n\n\n\tIt/pps ended/vbd ./.\n"
	got, err := ReadBrown(strings.NewReader(text), "ca01")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{strings.Fields(`The jury said " 1/2 " .`), strings.Fields("It ended .")}
	if len(got) != 2 || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
		t.Errorf("got %q", got)
	}
	_, err = ReadBrown(strings.NewReader("\n\tok/jj broken\n"), "ca02")
	if err == nil || !strings.Contains(err.Error(), "ca02:2") || !strings.Contains(err.Error(), "broken") {
		t.Errorf("error %v, want file, line and token", err)
	}
}
