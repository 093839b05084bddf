package encoder

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/internal/refbench"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/tagger"
)

// BenchmarkPretrainThroughput times masked-LM pretraining steps (forward,
// backward, clipping and Adam) and held-out scoring (the forward pass
// without dropout or gradients) of an encoder preset, and in the same run
// the same model in PyTorch (testdata/reference_encoder.py) on exactly the
// same batches, masks included, and reports both throughputs and their
// ratios (package internal/refbench: rounds taken in turns, the median
// ratio, the worst, and by CPU time):
//
//	go test ./train/encoder -run '^$' -bench PretrainThroughput -benchtime 1x
//
// The sentences are refbench.Corpus's (CoNLL-2003's training text, or
// random ones where it is absent), in batches of NERFLOW_BENCH_BATCH
// sentences of similar length (as a pretraining draws them: the padding
// costs both sides alike); NERFLOW_BENCH_PRESET picks the size (default
// small); the other variables are refbench's.
func BenchmarkPretrainThroughput(b *testing.B) { benchEachThreads(b, benchPretrainOn) }

// benchEachThreads runs on, on a computing thread of its own, for each of
// refbench's thread counts, with the preset NERFLOW_BENCH_PRESET names on
// the device NERFLOW_BENCH_DEVICE names.
func benchEachThreads(b *testing.B, on func(b *testing.B, python string, cfg Config, preset string, device gotch.Device)) {
	python := refbench.Python(b)
	device, err := tagger.ParseDevice(os.Getenv("NERFLOW_BENCH_DEVICE"))
	if err != nil {
		b.Fatal(err)
	}
	preset := os.Getenv("NERFLOW_BENCH_PRESET")
	if preset == "" {
		preset = DefaultPreset
	}
	cfg, err := Preset(preset)
	if err != nil {
		b.Fatal(err)
	}
	defer kit.SetThreads(0)
	for _, n := range refbench.Threads(b) {
		b.Run(fmt.Sprintf("threads=%d", n), func(b *testing.B) {
			kit.SetThreads(n)
			kit.OnComputeThread(func(func()) { on(b, python, cfg, preset, device) })
		})
	}
}

func benchPretrainOn(b *testing.B, python string, cfg Config, preset string, device gotch.Device) {
	batchSize := refbench.EnvInt(b, "NERFLOW_BENCH_BATCH", 32)
	steps := refbench.EnvInt(b, "NERFLOW_BENCH_STEPS", 40)
	var text [][]string
	for _, s := range refbench.Corpus(b).Sentences {
		text = append(text, s.Tokens)
	}
	text = windows(text, cfg.MaxLen)
	v := NewVocab(text, 30000, 1)
	m, err := New(cfg, v, nil, 1, device)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	// Batches of sentences of similar length, in a shuffled order, masked
	// once: both sides read the same corrupted words and score the same
	// positions.
	order := rand.New(rand.NewPCG(1, 1)).Perm(len(text))
	slices.SortStableFunc(order, func(i, j int) int { return len(text[i]) - len(text[j]) })
	var groups [][]int
	for i := 0; i+batchSize <= len(order); i += batchSize {
		groups = append(groups, order[i:i+batchSize])
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
	groups, _ = refbench.Take(b, groups, steps)
	masks := rand.New(rand.NewPCG(2, 2))
	var batches []*batch
	for _, ids := range groups {
		var sents []maskedSentence
		for _, id := range ids {
			sents = append(sents, v.mask(text[id], DefaultMasking(), masks))
		}
		batches = append(batches, newBatch(sents))
	}
	timed := batches[refbench.Warmup:]
	tokens := 0
	for _, bt := range timed {
		tokens += bt.tokens
	}
	run := DefaultTrainConfig()
	spec := refbench.WriteSpec(b, benchSpec(m, batches, run))

	names, params := m.parameters()
	opt, err := kit.NewAdam(names, params, run.MaxGradNorm)
	if err != nil {
		b.Fatal(err)
	}
	defer opt.Close()
	dropout := rand.New(rand.NewPCG(3, 3))
	train := func(bs []*batch) {
		for _, bt := range bs {
			if _, err := m.step(bt, &kit.Step{LR: run.LearningRate, Opt: opt}, dropout); err != nil {
				b.Fatal(err)
			}
		}
	}
	score := func(bs []*batch) {
		kit.NoGrad(func() {
			for _, bt := range bs {
				g := kit.NewGraph(device)
				err := kit.Guard(func() {
					total, _ := m.mlmLoss(g, bt, false, nil)
					kit.Float32s(total)
				})
				g.Free()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	train(batches[:refbench.Warmup])
	score(batches[:refbench.Warmup])
	ref := refbench.Start(b, python, filepath.Join("testdata", "reference_encoder.py"), spec, device)
	defer ref.Close()
	var weights int64
	for _, p := range params {
		weights += int64(p.Numel())
	}
	if ref.Params != weights {
		b.Fatalf("the reference's model has %d weights, the Go side's %d", ref.Params, weights)
	}
	_, summary := refbench.Compare(b, ref, tokens, func() { train(timed) }, func() { score(timed) })
	b.Logf("encoder preset %s (%d layers of %d, %d heads) on %v, batch %d: %d timed batches, %d tokens, vocabulary %d words, %d thread(s); %s",
		preset, cfg.Layers, cfg.Dim, cfg.Heads, device, batchSize, len(timed), tokens, v.Len(), kit.Threads(), summary)
}

// benchSpec is the architecture, the optimizer's settings and the
// batches, laid out as the Go side computes them, for the reference.
func benchSpec(m *Model, batches []*batch, run TrainConfig) map[string]any {
	var bs []map[string]any
	for _, bt := range batches {
		bs = append(bs, batchSpec(bt))
	}
	cfg := referenceConfig(m)
	cfg["lr"], cfg["clip"] = run.LearningRate, run.MaxGradNorm
	return map[string]any{"config": cfg, "batches": bs}
}

// referenceConfig is the encoder's architecture, for a reference to build.
func referenceConfig(m *Model) map[string]any {
	c := m.Config
	return map[string]any{
		"words": m.Vocab.Len(), "chars": len(m.Vocab.Chars), "dim": c.Dim, "layers": c.Layers, "heads": c.Heads,
		"ffn": c.FFN, "max_len": c.MaxLen, "word_dim": c.WordDim, "char_dim": c.CharDim, "char_filters": c.CharFilters,
		"dropout": c.Dropout, "attn_dropout": c.AttnDropout, "pre_ln": c.PreLN, "layer_norm_eps": layerNormEps,
	}
}

// batchSpec is a batch as the encoder reads it: word ids, the distinct
// spellings' character rows and where each token's is, what is scored.
func batchSpec(bt *batch) map[string]any {
	r := kit.NewCharRows(bt.spellings)
	of := r.Of
	if of == nil {
		for i := range bt.spellings {
			of = append(of, int64(i))
		}
	}
	return map[string]any{
		"n": bt.n, "t": bt.t, "ids": bt.ids, "char_ids": r.IDs, "char_mask": r.Mask, "char_rows": r.Rows,
		"char_len": r.Length, "of": of, "char_row": bt.charRow, "predict": bt.predict, "targets": bt.targets,
		"lens": bt.lens, "tokens": bt.tokens,
	}
}

// BenchmarkFineTuneThroughput times the steps of fine-tuning the encoder
// under a tagger (its BiLSTM reads the encoder's states beside its word
// vectors, characters and casing; a CRF head, the tagger's default sizes;
// the encoder's weights in a parameter group of their own) and the
// tagger's prediction, and in the same run the same model in PyTorch
// (testdata/reference_finetune.py, which puts the encoder's and the
// tagger's references together) on the same batches:
//
//	go test ./train/encoder -run '^$' -bench FineTuneThroughput -benchtime 1x
//
// The variables are BenchmarkPretrainThroughput's; the batches are drawn
// as a tagger's training draws them. The benchmark fails if the two
// models' weight counts differ.
func BenchmarkFineTuneThroughput(b *testing.B) { benchEachThreads(b, benchFineTuneOn) }

func benchFineTuneOn(b *testing.B, python string, cfg Config, preset string, device gotch.Device) {
	batchSize := refbench.EnvInt(b, "NERFLOW_BENCH_BATCH", 32)
	steps := refbench.EnvInt(b, "NERFLOW_BENCH_STEPS", 40)
	c := refbench.Corpus(b)
	var text [][]string
	for _, s := range c.Sentences {
		text = append(text, s.Tokens)
	}
	enc, err := New(cfg, NewVocab(windows(text, cfg.MaxLen), 30000, 1), nil, 1, device)
	if err != nil {
		b.Fatal(err)
	}
	labels, err := tagger.NewLabels(corpus.BIO, []string{"PER", "LOC", "ORG", "MISC"})
	if err != nil {
		enc.Close()
		b.Fatal(err)
	}
	tc := tagger.DefaultConfig()
	tc.Head, tc.Scheme, tc.EncoderPlacement = tagger.CRFHead, "bio", tagger.EncoderUnder
	// The tagger owns the encoder from here on.
	m, err := tagger.NewTagger(tc, tagger.NewVocab(c, nil, tagger.MinWordCount(1)), labels, nil, 1, device, tagger.WithEncoder(enc))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	run := tagger.DefaultTrainConfig()
	run.Loss, run.BatchSize = tagger.LossCRF, batchSize
	st, err := tagger.NewSteps(m, c, run, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	batches, timed := refbench.Take(b, st.Batches(batchSize, 1), steps)

	// The reference gets the tagger's inputs and, per batch, the encoder's:
	// the windows of its sentences (in the batch's order) laid out as
	// States lays them out, and for each window its sentence and offset.
	spec := st.ReferenceSpec(batches)
	spec["encoder"] = referenceConfig(enc)
	var encBatches []map[string]any
	for _, ids := range batches {
		pieces, where := enc.pieces(st.Sentences(ids))
		layout := batchSpec(newBatch(pieces))
		layout["windows"] = where
		encBatches = append(encBatches, layout)
	}
	spec["encoder_batches"] = encBatches
	specFile := refbench.WriteSpec(b, spec)

	train, predict := refbench.Must(b, st.Train), refbench.Must(b, st.Predict)
	train(batches[:refbench.Warmup])
	predict(batches[:refbench.Warmup])
	ref := refbench.Start(b, python, filepath.Join("testdata", "reference_finetune.py"), specFile, device)
	defer ref.Close()
	if ref.Params != st.Weights() {
		b.Fatalf("the reference's model has %d weights, the Go side's %d", ref.Params, st.Weights())
	}
	tokens := st.Tokens(timed)
	_, summary := refbench.Compare(b, ref, tokens, func() { train(timed) }, func() { predict(timed) })
	b.Logf("tagger (CRF) over encoder preset %s (%d layers of %d, %d heads) on %v, batch %d: %d timed batches, %d tokens, %d weights, %d thread(s); %s",
		preset, cfg.Layers, cfg.Dim, cfg.Heads, device, batchSize, len(timed), tokens, st.Weights(), kit.Threads(), summary)
}
