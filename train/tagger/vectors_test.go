package tagger

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/kit"
)

// vectorsTable is a pretrained table of dimension 12: four words of the
// fixture corpus and two ("zanzibar", "lisbon") that it lacks. Word i has
// the components i + j/100.
func vectorsTable(t *testing.T) *embeddings.Table {
	t.Helper()
	words := []string{"paris", "berlin", "london", "the", "zanzibar", "lisbon"}
	const dim = 12
	vecs := make([]float32, len(words)*dim)
	for i := range words {
		for j := range dim {
			vecs[i*dim+j] = float32(i) + float32(j)/100
		}
	}
	tab, err := embeddings.NewTable(dim, words, vecs)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// wordVectors returns the word vectors the tagger feeds its encoder for
// tokens.
func wordVectors(t *testing.T, m *Tagger, tokens ...string) [][]float32 {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ids := make([]int64, len(tokens))
	for i, tok := range tokens {
		ids[i] = int64(m.Vocab.Word(tok))
	}
	var flat []float32
	err := kit.Guard(func() {
		g := kit.NewGraph(m.device)
		defer g.Free()
		flat = kit.Float32s(m.embedWords(g, ids))
	})
	if err != nil {
		t.Fatal(err)
	}
	dim := m.Config.WordDim
	out := make([][]float32, len(tokens))
	for i := range out {
		out[i] = flat[i*dim : (i+1)*dim]
	}
	return out
}

// trainedRow is the current weight row of word id i.
func trainedRow(t *testing.T, m *Tagger, i int) []float32 {
	t.Helper()
	var all []float32
	if err := kit.Guard(func() { all = kit.Float32s(m.wordEmb) }); err != nil {
		t.Fatal(err)
	}
	d := m.Config.WordDim
	return all[i*d : (i+1)*d]
}

// TestPretrainedVectorsOfUnseenWords: a word absent from the training corpus
// but in the pretrained table gets exactly its pretrained vector, before and
// after training and after a save/load round trip; a word in neither gets
// the unknown vector; training moves the trained rows and no frozen one.
func TestPretrainedVectorsOfUnseenWords(t *testing.T) {
	c := fixtureCorpus(fixture)
	tab := vectorsTable(t)
	vocab := NewVocab(c, tab, MinWordCount(1))
	if !slices.Equal(vocab.Words[1:1+vocab.Pretrained], []string{"paris", "berlin", "london", "the"}) {
		t.Fatalf("trained pretrained words %q", vocab.Words[1:1+vocab.Pretrained])
	}
	if got, want := vocab.Word("Zanzibar"), len(vocab.Words)+4; got != want || !vocab.IsFrozen(got) {
		t.Fatalf("Zanzibar: id %d, want frozen row %d", got, want)
	}
	if got := vocab.Word("Xyzzy"); got != unkWord || vocab.Known("Xyzzy") || !vocab.Known("Zanzibar") {
		t.Fatalf("Xyzzy: id %d, want the unknown word", got)
	}
	if slices.Contains(vocab.Words, "zanzibar") || slices.Contains(vocab.Words, "lisbon") {
		t.Fatalf("unseen pretrained words among the trained rows: %q", vocab.Words)
	}

	labels, err := NewLabels(corpus.IO, []string{"PER", "LOC"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewTagger(tinyConfig(TokenHead, "io"), vocab, labels, tab, 1, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tokens := []string{"Zanzibar", "LISBON", "Paris", "Xyzzy"}
	v := wordVectors(t, m, tokens...)
	unk := trainedRow(t, m, unkWord)
	for i, want := range [][]float32{tab.Vector(4), tab.Vector(5), tab.Vector(0), unk} {
		if !slices.Equal(v[i], want) {
			t.Fatalf("before training, %s: vector %v, want %v", tokens[i], v[i], want)
		}
	}

	tr, err := NewTrainer(m, tinyTrainConfig(LossCE))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	v = wordVectors(t, m, tokens...)
	for i, want := range [][]float32{tab.Vector(4), tab.Vector(5)} {
		if !slices.Equal(v[i], want) {
			t.Fatalf("after training, %s: vector %v, want the pretrained %v", tokens[i], v[i], want)
		}
	}
	var frozen []float32
	if err := kit.Guard(func() { frozen = kit.Float32s(m.frozenEmb) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(frozen, tab.Vectors) {
		t.Fatal("training changed the frozen table")
	}
	if slices.Equal(v[2], tab.Vector(0)) {
		t.Fatal("training did not move the row of Paris, a training word")
	}
	if !slices.Equal(v[3], trainedRow(t, m, unkWord)) {
		t.Fatal("Xyzzy does not get the unknown vector")
	}

	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	lv := wordVectors(t, loaded, tokens...)
	for i := range tokens {
		if !slices.Equal(lv[i], v[i]) {
			t.Fatalf("after loading, %s: vector %v, want %v", tokens[i], lv[i], v[i])
		}
	}
	unseen := fixtureCorpus([]string{"Zanzibar/B-LOC and Lisbon/B-LOC are far from Xyzzy/B-LOC ."})
	before, err := m.Predict(unseen, 2)
	if err != nil {
		t.Fatal(err)
	}
	after, err := loaded.Predict(unseen, 2)
	if err != nil {
		t.Fatal(err)
	}
	for tok := range before[0].Probs {
		if !slices.Equal(before[0].Probs[tok], after[0].Probs[tok]) {
			t.Fatalf("token %d: probabilities differ after loading", tok+1)
		}
	}
}

// TestCheckpointVectorsFile: a checkpoint with a frozen table is rejected
// when its vectors do not match what tagger.json records or its format is
// unknown; a format 1 checkpoint (no frozen table) still loads.
func TestCheckpointVectorsFile(t *testing.T) {
	c := fixtureCorpus(fixture)
	labels, err := NewLabels(corpus.IO, []string{"PER", "LOC"})
	if err != nil {
		t.Fatal(err)
	}
	tab := vectorsTable(t)
	m, err := NewTagger(tinyConfig(TokenHead, "io"), NewVocab(c, tab), labels, tab, 1, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	edit := func(dir string, f func(spec map[string]any)) {
		b, err := os.ReadFile(filepath.Join(dir, TaggerFile))
		if err != nil {
			t.Fatal(err)
		}
		var spec map[string]any
		if err := json.Unmarshal(b, &spec); err != nil {
			t.Fatal(err)
		}
		f(spec)
		b, _ = json.Marshal(spec)
		if err := os.WriteFile(filepath.Join(dir, TaggerFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit(dir, func(s map[string]any) { s["vectors_crc"] = 12345 })
	if _, err := Load(dir, gotch.CPU); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("vectors of another training: %v", err)
	}
	edit(dir, func(s map[string]any) { s["format"] = taggerFormat + 1 })
	if _, err := Load(dir, gotch.CPU); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("format %d", taggerFormat+1)) {
		t.Fatalf("unknown format: %v", err)
	}

	old := newTiny(t, c, tinyConfig(TokenHead, "io"), 1)
	oldDir := t.TempDir()
	if err := old.Save(oldDir); err != nil {
		t.Fatal(err)
	}
	edit(oldDir, func(s map[string]any) { s["format"] = 1 })
	loaded, err := Load(oldDir, gotch.CPU)
	if err != nil {
		t.Fatalf("format 1: %v", err)
	}
	loaded.Close()
}

// A checkpoint's vectors.bin is byte for byte the embeddings file it was
// trained with (written, read back, given to the tagger, saved): an output
// that carries an input's file unchanged refers to the store's one copy
// (artifact.Writer.PutFile), so every model of a table costs the store
// only its weights.
func TestCheckpointVectorsAreTheInputsBytes(t *testing.T) {
	var file bytes.Buffer
	if err := embeddings.Write(&file, vectorsTable(t)); err != nil {
		t.Fatal(err)
	}
	tab, err := embeddings.Read(bytes.NewReader(file.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	labels, err := NewLabels(corpus.IO, []string{"PER", "LOC"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewTagger(tinyConfig(TokenHead, "io"), NewVocab(fixtureCorpus(fixture), tab), labels, tab, 1, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(filepath.Join(dir, VectorsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(saved, file.Bytes()) {
		t.Errorf("the checkpoint's %s (%d bytes) differs from the embeddings file (%d bytes): each model would store its own copy", VectorsFile, len(saved), file.Len())
	}
}
