package selftrain

import (
	"log/slog"

	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/train/tagger"
)

// WithAugmentation adds RoSTER's augmented sentences to a self-training run
// on c: every epoch, a new contextual augmentation of c drawn with model
// (seeded by cfg.Seed and the epoch), on whose sentences the type head is
// fitted to the targets of their originals. model is any masked LM: the
// LSTM language models of augment.lm or an encoder's masked-LM head. log,
// if not nil, receives the augmentation's counts.
func WithAugmentation(model augment.MaskedLM, c *corpus.Corpus, cfg augment.Config, log *slog.Logger) tagger.TrainerOption {
	return tagger.WithAugmented(func(epoch int) ([]corpus.Sentence, error) {
		aug, st, err := augment.Sentences(model, c.Sentences, cfg, epoch)
		if err != nil {
			return nil, err
		}
		if log != nil {
			log.Info("augmented sentences", "epoch", epoch, "tokens", st.Tokens, "masked", st.Masked, "replaced", st.Replaced)
		}
		return aug, nil
	})
}
