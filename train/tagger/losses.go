package tagger

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/stages"
)

// Loss is a training objective, a named implementation registered with
// RegisterLoss: a new loss is one file, in this package or another, that
// implements it and registers itself in init (see loss_ce.go, loss_gce.go,
// loss_kl.go, loss_crf.go, and plugin_test.go for one outside the
// package). A loss with settings of its own also implements
// ConfigurableLoss.
type Loss interface {
	// Doc says what the loss is, for the stage docs.
	Doc() string
	// Head is the head whose outputs the loss trains.
	Head() string
	// Soft says whether the loss fits soft targets (WithSoftTargets)
	// instead of the sentences' tags.
	Soft() bool
	// Compute is the loss of a batch, a scalar of lb.G, nil when the batch
	// has nothing to learn from (every token ignored or removed). Inside
	// kit.Guard.
	Compute(lb *LossBatch) *ts.Tensor
}

// ConfigurableLoss is a loss with hyperparameters of its own (gce's q,
// negsample's sampling, partial's miss_rate). It declares them once, with
// the stage parameters' declarations (name, default, doc, range or
// choices); the stage train.tagger and the command nerflow train expose
// every registered loss's parameters under those names, and the trainer
// gives the chosen loss only its own, through Configure.
type ConfigurableLoss interface {
	Loss
	// Params declares the loss's own hyperparameters. Two losses may
	// declare the same parameter only with the same declaration: it is then
	// one setting that both read.
	Params() []stages.Param
	// Configure returns the loss set to the values p holds for Params
	// (given ones or defaults, already checked against their declarations):
	// the returned loss owns them, in a form of its choosing. It refuses
	// values that the declarations cannot rule out alone.
	Configure(p stages.Params) (Loss, error)
}

// TagSetLoss is a loss whose settings name entity types (partial's
// per-type rates). The trainer binds it to the tagger's tag set before the
// first step; ForLabels refuses a type the tag set lacks.
type TagSetLoss interface {
	Loss
	ForLabels(labels *Labels) (Loss, error)
}

// LossBatch is what a loss sees of a training step.
type LossBatch struct {
	G     *kit.Graph
	Head  HeadWeights // of the loss's Head
	H     *ts.Tensor  // encoder output [tokens, 2*Hidden], packed
	Batch *Batch
	K     int // tags

	exs     []example
	weights []tokenWeights // noisy-label weights by example, nil without removal
	// sampling is the epoch's negative sampling (LossNegSample).
	sampling *sampling
	// typ and entity are the head's token outputs on H, once computed
	// (TokenOutputs).
	typ, entity *ts.Tensor
}

// TokenOutputs returns the head's type and entity-vs-O logits on the batch
// (the head must implement TokenOutputs), computed once: the augmented
// term reads the originals' type logits after the loss has.
func (lb *LossBatch) TokenOutputs() (typ, entity *ts.Tensor) {
	if lb.typ == nil {
		h, ok := lb.Head.(TokenOutputs)
		if !ok {
			kit.Abort(fmt.Errorf("head %T has no token outputs", lb.Head))
		}
		lb.typ, lb.entity = h.Outputs(lb.G, lb.H)
	}
	return lb.typ, lb.entity
}

// Targets returns the hard target of every token of the batch, in packed
// order: a tag index of the tagger's Labels (0 is O), Ignored, or
// AnyEntity; nil for a batch of unlabeled sentences.
func (lb *LossBatch) Targets() []int32 {
	b := lb.Batch
	out := make([]int32, b.n)
	for i, id := range b.ids {
		targets := lb.exs[id].targets
		if targets == nil {
			return nil
		}
		for t, y := range targets {
			out[b.pos(i, t)] = y
		}
	}
	return out
}

var losses = newNamed[Loss]("loss")

// RegisterLoss makes a loss available under name (the param loss of
// train.tagger), with its parameters if it is a ConfigurableLoss; it
// panics on a duplicate, and on a parameter that clashes with one of the
// tagger's own or with another loss's declaration of the same name, as
// stage registration does.
func RegisterLoss(name string, l Loss) {
	if c, ok := l.(ConfigurableLoss); ok {
		own := map[string]bool{}
		for _, f := range sharedFields(new(Hyperparams)) {
			own[f.Name] = true
		}
		for _, p := range c.Params() {
			if own[p.Name] {
				panic("train: loss " + name + " declares " + p.Name + ", a parameter of the tagger itself")
			}
			if q, ok := lossParamDecls()[p.Name]; ok && !reflect.DeepEqual(p, q) {
				panic("train: loss " + name + " declares " + p.Name + " unlike another loss does")
			}
		}
	}
	losses.register(name, l)
}

// LossNames lists the registered losses.
func LossNames() []string { return losses.names() }

func lookupLoss(name string) (Loss, error) { return losses.lookup(name) }

// lossDoc documents the param loss: every loss with its head.
func lossDoc() string {
	var parts []string
	for _, name := range LossNames() {
		l, _ := lookupLoss(name)
		parts = append(parts, fmt.Sprintf("%s (%s head): %s", name, l.Head(), l.Doc()))
	}
	return strings.Join(parts, "; ")
}

// lossParams declares the parameters of every registered loss, each once,
// in the order of LossNames and of each loss's declarations.
func lossParams() []stages.Param {
	var out []stages.Param
	seen := map[string]bool{}
	for _, name := range LossNames() {
		l, _ := lookupLoss(name)
		for _, p := range paramsOf(l) {
			if !seen[p.Name] {
				seen[p.Name] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// lossParamDecls is lossParams by name.
func lossParamDecls() map[string]stages.Param {
	out := map[string]stages.Param{}
	for _, p := range lossParams() {
		out[p.Name] = p
	}
	return out
}

// paramsOf is l's own parameters (none unless it is a ConfigurableLoss).
func paramsOf(l Loss) []stages.Param {
	if c, ok := l.(ConfigurableLoss); ok {
		return c.Params()
	}
	return nil
}

// configureLoss returns the loss of cfg, which must train head, set to its
// own parameters' values (ownParams).
func configureLoss(cfg TrainConfig, head string) (Loss, error) {
	l, err := lookupLoss(cfg.Loss)
	if err != nil {
		return nil, err
	}
	if l.Head() != head {
		return nil, fmt.Errorf("loss %q trains the %s head, not %s", cfg.Loss, l.Head(), head)
	}
	p, err := ownParams(l, cfg)
	if err != nil {
		return nil, err
	}
	if err := checkRemovalOwner(l, cfg); err != nil {
		return nil, err
	}
	c, ok := l.(ConfigurableLoss)
	if !ok {
		return l, nil
	}
	configured, err := c.Configure(p)
	if err != nil {
		return nil, fmt.Errorf("loss %s: %w", cfg.Loss, err)
	}
	return configured, nil
}

// ownParams resolves the values of l's own parameters in cfg.LossParams,
// the declared defaults for those not there. The values of other losses'
// parameters are left unread, as the stage, which declares every loss's
// parameters, passes them all; a name that no registered loss declares is
// an error.
func ownParams(l Loss, cfg TrainConfig) (stages.Params, error) {
	decls := lossParamDecls()
	mine := map[string]bool{}
	for _, p := range paramsOf(l) {
		mine[p.Name] = true
	}
	own := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(cfg.LossParams)) {
		switch {
		case mine[name]:
			own[name] = cfg.LossParams[name]
		case decls[name].Name == "":
			return stages.Params{}, fmt.Errorf("loss parameter %q: no registered loss declares it", name)
		}
	}
	return stages.ResolveParams("loss "+cfg.Loss, paramsOf(l), own)
}

// tokenWeights are the per-token loss weights of one example under
// noisy-label removal: entity for the entity-vs-O loss, typ for the type
// loss. nil slices mean weight 1.
type tokenWeights struct {
	entity, typ []float32
}

func weightAt(w []float32, t int) float32 {
	if w == nil {
		return 1
	}
	return w[t]
}

// hardTokenLoss is the token head's loss on hard labels (as RoSTER): the
// entity-vs-O loss over every token plus the type loss over entity tokens,
// each a weighted mean of rowLoss, which is cross entropy or one of its
// robust variants.
func hardTokenLoss(lb *LossBatch, rowLoss func(g *kit.Graph, logits *ts.Tensor, targets []int64, weights []float32) *ts.Tensor) *ts.Tensor {
	b := lb.Batch
	entity := make([]int64, b.n)
	entityW := make([]float32, b.n)
	typ := make([]int64, b.n)
	typW := make([]float32, b.n)
	for i, id := range b.ids {
		var w tokenWeights
		if lb.weights != nil {
			w = lb.weights[id]
		}
		for t, y := range lb.exs[id].targets {
			p := b.pos(i, t)
			switch {
			case y == ignored:
			case y == anyEntity:
				entity[p], entityW[p] = 1, weightAt(w.entity, t)
			case y == 0:
				entityW[p] = weightAt(w.entity, t)
			default:
				entity[p], entityW[p] = 1, weightAt(w.entity, t)
				typ[p], typW[p] = int64(y-1), weightAt(w.typ, t)
			}
		}
	}
	typLogits, entityLogits := lb.TokenOutputs()
	return addLosses(lb.G, rowLoss(lb.G, entityLogits, entity, entityW), rowLoss(lb.G, typLogits, typ, typW))
}

// addLosses sums the terms that are not nil (nil if all are).
func addLosses(g *kit.Graph, terms ...*ts.Tensor) *ts.Tensor {
	var total *ts.Tensor
	for _, l := range terms {
		switch {
		case l == nil:
		case total == nil:
			total = l
		default:
			total = g.T(total.Add(l, false))
		}
	}
	return total
}
