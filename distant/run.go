package distant

import "github.com/nerflow/nerflow/corpus"

// Run is distant labeling from loaded data to labels and report, shared by
// the command and the stage: it compiles the gazetteers, labels every
// sentence of c in scheme and, when gold is not nil, labels the gold
// sentences with the same matcher and scores them against their tags. The
// gold sentences need not be part of c: a held-out set with gold tags is
// scored as it is, and c's statistics do not include it.
func Run(c *corpus.Corpus, gazetteers []*Gazetteer, gold *corpus.Corpus, scheme corpus.Scheme, opts ...Option) (*corpus.Corpus, Report, error) {
	m, err := NewMatcher(gazetteers, opts...)
	if err != nil {
		return nil, Report{}, err
	}
	labeled, report, err := labelAndScore(m, c, gold, scheme)
	if err == nil {
		report.Warnings = report.warnings()
	}
	return labeled, report, err
}
