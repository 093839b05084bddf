package tagger_test

import "github.com/nerflow/nerflow/train/internal/traintest"

var (
	fixture       = traintest.Fixture
	fixtureCorpus = traintest.Corpus
)
