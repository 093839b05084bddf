package crfvae

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/train/tagger"
)

// syntheticCorpus is n sentences of 5 to 30 tokens drawn from a vocabulary
// of words w0..w5999 (so that the generator's default 5,000 words fill
// up), tagged with a PER or LOC entity now and then.
func syntheticCorpus(n int, seed uint64) *corpus.Corpus {
	rng := rand.New(rand.NewPCG(seed, 3))
	c := &corpus.Corpus{}
	for range n {
		var s corpus.Sentence
		for range 5 + rng.IntN(26) {
			s.Tokens = append(s.Tokens, fmt.Sprintf("w%d", rng.IntN(6000)))
			tag := "O"
			switch rng.IntN(10) {
			case 0:
				tag = "B-PER"
			case 1:
				tag = "B-LOC"
			}
			s.Tags = append(s.Tags, tag)
		}
		c.Sentences = append(c.Sentences, s)
	}
	return c
}

// BenchmarkEpochCost is the cost of the CRF-VAE: one epoch of the default
// tagger (CRF head) on 128 labeled sentences with the objective on as many
// unlabeled ones per step (default generator settings, factored and
// transformer), as a ratio to the same epoch without it, measured in the
// same run (make bench). The CoNLL-2003 runs of docs/crfvae.md saw the
// same kind of ratio in wall-clock time.
func BenchmarkEpochCost(b *testing.B) {
	labeled, unlabeled := syntheticCorpus(128, 1), syntheticCorpus(1024, 2)
	h := Hyperparams()
	h.Run.Epochs, h.Run.Seed = 1, 1
	job := tagger.Job{Train: labeled, Unlabeled: unlabeled, Model: h.Model, Run: h.Run, Device: gotch.CPU, MinWordCount: 1}
	epoch := func(cfg *Config) time.Duration {
		var opts []tagger.TrainerOption
		if cfg != nil {
			obj, err := NewObjective(*cfg, unlabeled, 1)
			if err != nil {
				b.Fatal(err)
			}
			defer obj.Close()
			opts = append(opts, tagger.WithUnlabeled(unlabeled, obj, cfg.Weight))
		}
		start := time.Now()
		m, _, err := tagger.Fit(context.Background(), job, opts...)
		if err != nil {
			b.Fatal(err)
		}
		m.Close()
		return time.Since(start)
	}
	epoch(nil) // libtorch's one-time start-up is no part of either
	for range b.N {
		base := epoch(nil)
		for _, gen := range Generators {
			cfg := DefaultConfig()
			cfg.Generator = gen
			b.ReportMetric(epoch(&cfg).Seconds()/base.Seconds(), gen+"/supervised")
		}
	}
}
