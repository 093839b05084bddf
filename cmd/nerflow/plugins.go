package main

// The plug-ins compiled into this binary, the way Caddy lists its modules:
// each import registers storage drivers, pipeline stages or methods by name
// in init.
import (
	_ "github.com/nerflow/nerflow/augment"     // stages: augment.lm, augment.sentences
	_ "github.com/nerflow/nerflow/distant"     // stage: distant
	_ "github.com/nerflow/nerflow/embeddings"  // stage: embeddings
	_ "github.com/nerflow/nerflow/methods"     // methods: distant, supervised
	_ "github.com/nerflow/nerflow/predict"     // stage: predict.entities
	_ "github.com/nerflow/nerflow/registry"    // stage: register
	_ "github.com/nerflow/nerflow/storage/all" // stores: file, s3
	_ "github.com/nerflow/nerflow/train"       // stages: train.tagger, train.predict, train.evaluate
)
