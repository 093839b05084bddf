package tagger

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
)

// A Predictor is a trained model that tags corpora. The tagger is one; a
// model of another kind (the variational sequential labeler of package
// train/vsl) registers how to load it, so that the stages train.predict
// and train.evaluate, and anything else that loads a saved model with
// LoadModel, run every kind through the same code.
type Predictor interface {
	// Predict tags every sentence of c, batchSize sentences at a time.
	Predict(c *corpus.Corpus, batchSize int) ([]Prediction, error)
	// TagSet is the scheme and the tags the predictions are over.
	TagSet() *Labels
	Close()
}

// modelKind is a kind of saved model, told apart by the file that
// describes it.
type modelKind struct {
	file string
	load func(dir string, device gotch.Device) (Predictor, error)
}

var modelKinds []modelKind

// RegisterModelKind declares a kind of saved model: a directory holding
// file (e.g. TaggerFile) is loaded with load. Called from init.
func RegisterModelKind(file string, load func(dir string, device gotch.Device) (Predictor, error)) {
	for _, k := range modelKinds {
		if k.file == file {
			panic("train: model kind " + file + " registered twice")
		}
	}
	modelKinds = append(modelKinds, modelKind{file: file, load: load})
}

func init() {
	RegisterModelKind(TaggerFile, func(dir string, device gotch.Device) (Predictor, error) {
		m, err := Load(dir, device)
		if err != nil {
			return nil, err
		}
		return m, nil
	})
}

// LoadModel loads the saved model in dir onto device, whatever its kind.
func LoadModel(dir string, device gotch.Device) (Predictor, error) {
	var files []string
	for _, k := range modelKinds {
		if _, err := os.Stat(filepath.Join(dir, k.file)); err == nil {
			return k.load(dir, device)
		}
		files = append(files, k.file)
	}
	return nil, fmt.Errorf("loading a model: %s holds none of %s", dir, strings.Join(files, ", "))
}

// TagSet is the tagger's scheme and tags (Predictor).
func (m *Tagger) TagSet() *Labels { return m.Labels }
