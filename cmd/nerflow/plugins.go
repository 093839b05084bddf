package main

// The plug-ins compiled into this binary, the way Caddy lists its modules:
// each import registers storage drivers, pipeline stages or methods by name
// in init.
import (
	_ "github.com/nerflow/nerflow/augment"          // stages: augment.lm, augment.sentences
	_ "github.com/nerflow/nerflow/distant"          // stage: distant.label
	_ "github.com/nerflow/nerflow/embeddings"       // stage: embeddings.vectors
	_ "github.com/nerflow/nerflow/ensemble"         // stage: ensemble.average
	_ "github.com/nerflow/nerflow/methods"          // methods: bond, crfvae, distant, negsample, roster, supervised, taglm, vsl
	_ "github.com/nerflow/nerflow/predict"          // stage: predict.entities
	_ "github.com/nerflow/nerflow/registry"         // stage: registry.register
	_ "github.com/nerflow/nerflow/selftrain"        // stage: selftrain.tagger
	_ "github.com/nerflow/nerflow/storage/all"      // stores: file, s3
	_ "github.com/nerflow/nerflow/subset"           // stages: subset.mask, subset.split
	_ "github.com/nerflow/nerflow/train/trainstage" // stages: train.tagger, train.predict, train.evaluate
	_ "github.com/nerflow/nerflow/train/vsl"        // stage: train.vsl
)
