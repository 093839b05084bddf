package selftrain

import (
	"context"
	"fmt"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/train/tagger"
)

// Config is a self-training run: the trainer's settings (its loss is
// always kl), how often the targets follow the model, and the p(entity)
// under which a token's types are left out.
type Config struct {
	Run            tagger.TrainConfig
	UpdateInterval int
	Targets        Targets
}

// DefaultConfig is RoSTER's: 5 epochs, targets recomputed every 100 steps,
// types of tokens with p(entity) < 0.8 left out.
func DefaultConfig() Config {
	run := tagger.DefaultTrainConfig()
	run.Loss, run.Epochs = tagger.LossKL, 5
	return Config{Run: run, UpdateInterval: 100, Targets: Targets{Threshold: 0.8, Entity: EntityHard}}
}

// Train self-trains m, a token-head tagger (RoSTER's distilled model), on
// the sentences of c (their tags, if any, are not used), with dev, if not
// nil, for model selection as in Trainer.Run. opts add to the trainer's
// options (logging, progress, checkpoints).
func Train(ctx context.Context, m *tagger.Tagger, c, dev *corpus.Corpus, cfg Config, opts ...tagger.TrainerOption) (*tagger.Result, error) {
	if m.Config.Head != tagger.TokenHead {
		return nil, fmt.Errorf("self-training needs a tagger with the %s head, not %s", tagger.TokenHead, m.Config.Head)
	}
	targets := func(preds []tagger.Prediction) ([][][]float32, error) {
		return SoftLabels(probsOf(preds), cfg.Targets)
	}
	cfg.Run.Loss = tagger.LossKL
	return selfTrain(ctx, m, c, dev, cfg.Run, cfg.UpdateInterval, targets, opts...)
}

// targetFunc turns the current model's predictions of the training corpus
// (Tagger.Predict's) into the targets of the next steps, in the layout of
// tagger.WithSoftTargets.
type targetFunc func(preds []tagger.Prediction) ([][][]float32, error)

// selfTrain is the loop every self-training method shares: the model
// predicts the corpus, targets turns its predictions into the targets of
// the next `every` steps, and so on, fitted with run's loss, a soft one
// (kl for a token head, tag_sets for a CRF). RoSTER and BOND differ in
// targets only.
func selfTrain(ctx context.Context, m *tagger.Tagger, c, dev *corpus.Corpus, run tagger.TrainConfig, every int, targets targetFunc, opts ...tagger.TrainerOption) (*tagger.Result, error) {
	if every < 1 {
		return nil, fmt.Errorf("update interval %d, want at least 1", every)
	}
	preds, err := m.Predict(c, 64)
	if err != nil {
		return nil, fmt.Errorf("self-training targets: %w", err)
	}
	soft, err := targets(preds)
	if err != nil {
		return nil, fmt.Errorf("self-training targets: %w", err)
	}
	opts = append(opts, tagger.WithSoftTargets(soft), tagger.WithSoftRefresh(every, targets))
	tr, err := tagger.NewTrainer(m, run, opts...)
	if err != nil {
		return nil, err
	}
	return tr.Run(ctx, c, dev)
}

// probsOf are the per-token distributions of predictions, sentence by
// sentence.
func probsOf(preds []tagger.Prediction) [][][]float32 {
	probs := make([][][]float32, len(preds))
	for i, p := range preds {
		probs[i] = p.Probs
	}
	return probs
}
