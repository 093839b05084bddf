package tagger

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/kit"
)

// dropWords replaces about p of the words by the unknown word and leaves
// the others as they were; at p 0 it draws nothing, so a run without word
// dropout keeps the dropout masks, and the weights, it had before.
func TestDropWords(t *testing.T) {
	ids := make([]int64, 20000)
	for i := range ids {
		ids[i] = int64(1 + i%50)
	}
	orig := slices.Clone(ids)
	rng := rand.New(rand.NewPCG(1, 2))
	got := dropWords(ids, 0.25, rng)
	if !slices.Equal(ids, orig) {
		t.Fatal("dropWords changed its input")
	}
	dropped := 0
	for i, id := range got {
		switch id {
		case unkWord:
			dropped++
		case ids[i]:
		default:
			t.Fatalf("token %d: %d became %d, want itself or the unknown word", i, ids[i], id)
		}
	}
	// 20,000 draws at 0.25: the standard deviation of the share is 0.003.
	if share := float64(dropped) / float64(len(ids)); share < 0.235 || share > 0.265 {
		t.Fatalf("dropped %.3f of the words, want about 0.25", share)
	}

	a, b := rand.New(rand.NewPCG(3, 4)), rand.New(rand.NewPCG(3, 4))
	if same := dropWords(ids, 0, a); &same[0] != &ids[0] {
		t.Fatal("p 0 copied the ids")
	}
	if a.Uint64() != b.Uint64() {
		t.Fatal("p 0 drew from the generator")
	}
}

// A tagger trained with word dropout still learns the fixture, predicts
// without dropping words (two predictions agree), and differs from one
// trained without it from the same seed; word_dropout is validated.
func TestWordDropoutTrains(t *testing.T) {
	c := fixtureCorpus(fixture)
	cfg := tinyConfig(CRFHead, "bio")
	cfg.WordDropout = 0.3
	m := newTiny(t, c, cfg, 1)
	checkLossFalls(t, m, tinyTrainConfig(LossCRF), c)
	p1, err := m.Predict(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := m.Predict(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := dataset.SamePredictions(p1, p2); err != nil {
		t.Fatalf("two predictions of the same tagger: %v", err)
	}

	plain := newTiny(t, c, tinyConfig(CRFHead, "bio"), 1)
	tr, err := NewTrainer(plain, tinyTrainConfig(LossCRF))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	if slices.Equal(kit.Float32s(m.wordEmb), kit.Float32s(plain.wordEmb)) {
		t.Fatal("word dropout 0.3 and none ended with the same word vectors")
	}

	for _, p := range []float64{-0.1, 1} {
		bad := tinyConfig(CRFHead, "bio")
		bad.WordDropout = p
		if err := bad.validate(); err == nil {
			t.Errorf("word_dropout %v accepted", p)
		}
	}
}
