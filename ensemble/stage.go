package ensemble

import (
	"fmt"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
)

// StageAverage is the name of the averaging stage.
const StageAverage = "ensemble.average"

func init() {
	stages.Register(stages.Stage{
		Name:    StageAverage,
		Version: 1,
		Doc: "Averages the per-token probabilities of several taggers' predictions of the same corpus (RoSTER's " +
			"ensemble of K seeds); the result is the soft input of a train.tagger with loss kl (distillation).",
		Inputs: []stages.Port{
			{Name: "predictions", Kind: "predictions", Many: true, Doc: dataset.PredictionsFile + " of each tagger (train.predict), all of one corpus with one tag set"},
		},
		Outputs: []stages.Port{
			{Name: "predictions", Kind: "predictions", Doc: dataset.PredictionsFile + ": the mean distribution of every token and its most probable tag"},
		},
		Run: runAverage,
	})
}

func runAverage(c *stages.Context) error {
	ins := c.Inputs("predictions")
	names := make([]string, len(ins))
	preds := make([]*dataset.Predictions, len(ins))
	for k, in := range ins {
		names[k] = artifactName(k, in)
		p, err := dataset.ReadPredictionsInput(in, names[k])
		if err != nil {
			return err
		}
		preds[k] = p
	}
	avg, err := Average(names, preds)
	if err != nil {
		return stages.Permanent(err)
	}
	c.Log.Info("averaged predictions", "taggers", len(preds), "sentences", len(avg.Sentences))
	out := c.Output("predictions")
	out.SetMeta("taggers", fmt.Sprint(len(preds)))
	out.SetMeta("scheme", avg.Scheme)
	return dataset.WritePredictionsOutput(out, avg)
}

// artifactName names the k-th input in errors: its position and the node
// or store prefix it came from.
func artifactName(k int, in *stages.Input) string {
	from := in.Prefix
	if in.Producer.NodeKey != "" {
		from = in.Producer.Stage + " " + in.Producer.NodeKey
	}
	return fmt.Sprintf("predictions #%d (%s)", k+1, from)
}
