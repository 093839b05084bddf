package registry

import (
	"fmt"

	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/internal/version"
	"github.com/nerflow/nerflow/stages"
)

// StageName is the stage a spec ends with to register its final model.
const StageName = "registry.register"

// CardFile is the file of a "model-card" artifact.
const CardFile = "card.json"

// Card is what the register stage writes: the model it declares and the
// metrics of its evaluations. Sync turns cards of succeeded runs into
// registered versions, adding what only the run knows (spec, parameters of
// the training node, datasets).
type Card struct {
	// Name is the model's name in the registry; empty means the spec's name.
	Name string `json:"name,omitempty"`
	// Model is the manifest of the model artifact (kind checkpoint).
	Model stages.Artifact `json:"model"`
	// Metrics are the evaluations connected to the stage, in spec order.
	Metrics []Metrics `json:"metrics,omitempty"`
	// Nerflow is the version of the binary that registered the model.
	Nerflow string `json:"nerflow"`
}

// Metrics is one evaluation report of a model.
type Metrics struct {
	// Digest is the digest of the report artifact.
	Digest string `json:"digest"`
	// Node is the evaluating node (filled in by Sync).
	Node string `json:"node,omitempty"`
	eval.Report
}

func init() {
	stages.Register(stages.Stage{
		Name:    StageName,
		Version: 1,
		Doc: "Declares a run's final model for the model registry: the model and the metrics of its evaluations. " +
			"When the run succeeds, the model is registered as NAME@N with its lineage (`nerflow models list`).",
		Params: []stages.Param{
			stages.StringParam("name", "", "name of the model in the registry (default: the spec's name)"),
		},
		Inputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: "the model to register"},
			{Name: "reports", Kind: "report", Many: true, Optional: true, Doc: "evaluation reports of the model (stage train.evaluate)"},
		},
		Outputs: []stages.Port{{Name: "card", Kind: "model-card", Doc: CardFile + ": the model, its metrics and the nerflow version"}},
		Run:     runStage,
	})
}

func runStage(c *stages.Context) error {
	name := c.Params.String("name")
	if name != "" {
		if err := ValidateName(name); err != nil {
			return stages.Permanent(err)
		}
	}
	card := Card{Name: name, Model: c.Input("model").Artifact, Nerflow: version.Version}
	for _, in := range c.Inputs("reports") {
		var r eval.Report
		if err := in.ReadJSON("report.json", &r); err != nil {
			return stages.Permanent(fmt.Errorf("reports: %w", err))
		}
		card.Metrics = append(card.Metrics, Metrics{Digest: in.Digest, Report: r})
	}
	return c.Output("card").WriteJSON(CardFile, card)
}
