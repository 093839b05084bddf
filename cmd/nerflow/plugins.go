package main

// The plug-ins compiled into this binary, the way Caddy lists its modules:
// each import registers storage drivers, pipeline stages or methods by name
// in init. Its comment names what it registers, and plugins_test.go checks
// that against the registries.
import (
	_ "github.com/nerflow/nerflow/augment"       // stages: augment.lm, augment.sentences
	_ "github.com/nerflow/nerflow/distant"       // stages: distant.label, distant.names, distant.tiebreak, distant.overlay, distant.capitalized, distant.firstwords
	_ "github.com/nerflow/nerflow/embeddings"    // stage: embeddings.vectors
	_ "github.com/nerflow/nerflow/ensemble"      // stages: ensemble.average, ensemble.label
	_ "github.com/nerflow/nerflow/eval"          // stages: eval.select, eval.table
	_ "github.com/nerflow/nerflow/methods"       // methods: autoner, bond, crfvae, distant, negsample, roster, supervised, taglm, vsl
	_ "github.com/nerflow/nerflow/predict"       // stage: predict.entities
	_ "github.com/nerflow/nerflow/refine"        // stages: refine.folds, refine.vote, refine.choose
	_ "github.com/nerflow/nerflow/registry"      // stage: registry.register
	_ "github.com/nerflow/nerflow/selftrain"     // stages: selftrain.tagger, selftrain.teacher
	_ "github.com/nerflow/nerflow/storage/all"   // stores: file, s3
	_ "github.com/nerflow/nerflow/subset"        // stages: subset.mask, subset.noise, subset.split
	_ "github.com/nerflow/nerflow/train/crfvae"  // stage: train.crfvae
	_ "github.com/nerflow/nerflow/train/encoder" // stage: encoder.pretrain
	_ "github.com/nerflow/nerflow/train/tagger"  // stages: train.tagger, train.predict, train.evaluate
	_ "github.com/nerflow/nerflow/train/vsl"     // stage: train.vsl
)
