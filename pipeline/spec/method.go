package spec

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/nerflow/nerflow/stages"
)

// Method is a named, typed template of a pipeline: a few documented
// parameters and named inputs, and a Build function that makes the nodes
// through a Builder. A user's spec calls it with `method: NAME`, `params:`
// and `inputs:` (docs/spec.md); `nerflow methods NAME` shows its
// declarations and `nerflow expand SPEC` the nodes it makes.
//
// A method lives in one file of package methods and registers itself from
// init, like a stage:
//
//	func init() {
//		spec.RegisterMethod(spec.Method{
//			Name:   "supervised",
//			Doc:    "Trains a tagger on gold labels and scores it.",
//			Params: []stages.Param{stages.IntParam("epochs", 15, "training epochs", stages.Range(1, 1000))},
//			Inputs: []stages.Port{{Name: "train", Kind: "corpus", Doc: "labeled sentences"}},
//			Build: func(b *spec.Builder) error {
//				t := b.Node("train", tagger.StageTrain).Pass("epochs").Input("corpus", b.In("train"))
//				b.Node("register", registry.StageName).Input("model", t.Out("model"))
//				return nil
//			},
//		})
//	}
type Method struct {
	Name string
	Doc  string
	// Params are declared and validated exactly like stage parameters.
	Params []stages.Param
	// Inputs are what the user connects under `inputs:` (a path, a store
	// URL, or an output of one of the spec's own nodes), declared like the
	// input ports of a stage: Optional inputs may be left out (the
	// method's graph changes with them), Many inputs take a list, and Kind
	// is checked against the ports the method connects them to.
	Inputs []stages.Port
	// Build makes the nodes. It reads the resolved parameters with
	// b.Params() and the given inputs with b.In; it branches on them to
	// add, drop or rewire nodes. Problems with the user's values are
	// reported with b.Errorf, which points at their line.
	Build func(b *Builder) error
}

// Param returns the declaration of the method parameter name.
func (m *Method) Param(name string) (stages.Param, bool) {
	for _, p := range m.Params {
		if p.Name == name {
			return p, true
		}
	}
	return stages.Param{}, false
}

// Input returns the declaration of the method input name.
func (m *Method) Input(name string) (stages.Port, bool) {
	for _, in := range m.Inputs {
		if in.Name == name {
			return in, true
		}
	}
	return stages.Port{}, false
}

func (m *Method) inputNames() string { return portNames(m.Inputs) }

var (
	methodsMu sync.RWMutex
	methods   = map[string]*Method{}
)

// RegisterMethod adds a method; like stages.Register it panics on a
// duplicate name or a malformed declaration, at init, where the author sees
// it first.
func RegisterMethod(m Method) {
	methodsMu.Lock()
	defer methodsMu.Unlock()
	if !nodeNameRE.MatchString(m.Name) || m.Build == nil {
		panic(fmt.Sprintf("spec: RegisterMethod(%q) needs a lower-case name and a Build function", m.Name))
	}
	if _, dup := methods[m.Name]; dup {
		panic(fmt.Sprintf("spec: method %s registered twice", m.Name))
	}
	seen := map[string]bool{}
	for _, p := range m.Params {
		if seen[p.Name] || strings.Contains(p.Name, ".") {
			panic(fmt.Sprintf("spec: method %s: parameter %q declared twice or with a dot", m.Name, p.Name))
		}
		seen[p.Name] = true
	}
	for _, in := range m.Inputs {
		if seen["input "+in.Name] {
			panic(fmt.Sprintf("spec: method %s: input %q declared twice", m.Name, in.Name))
		}
		seen["input "+in.Name] = true
	}
	methods[m.Name] = &m
}

// LookupMethod returns the method name.
func LookupMethod(name string) (*Method, bool) {
	methodsMu.RLock()
	defer methodsMu.RUnlock()
	m, ok := methods[name]
	return m, ok
}

// Methods returns the registered methods sorted by name.
func Methods() []*Method {
	methodsMu.RLock()
	defer methodsMu.RUnlock()
	out := make([]*Method, 0, len(methods))
	for _, m := range methods {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func methodNames() string {
	var names []string
	for _, m := range Methods() {
		names = append(names, m.Name)
	}
	if len(names) == 0 {
		return "none are registered in this binary"
	}
	return strings.Join(names, ", ")
}

// Builder makes the nodes of one method call. Its node methods chain:
//
//	t := b.Node("train", tagger.StageTrain).Queue("gpu").Pass("epochs").
//		FanOut("seed", 1, 2, 3).Input("corpus", b.In("train"))
//
// Every value it puts into a node remembers where it came from (a method
// parameter, a method input, or the method itself), so that an error found
// later, when the graph is validated against the stages, names the line of
// the user's file that caused it.
type Builder struct {
	method *Method
	name   string
	params stages.Params
	set    map[string]bool // method params the user set
	inputs map[string]Ref
	nodes  []*NodeBuilder
	byName map[string]*NodeBuilder
	errs   []builderError
}

type builderError struct{ field, msg string }

// Ref is what a node input port is connected to: an output of a node of the
// method, or a method input as the user gave it (one or several
// references). The zero Ref, the In of an input left out, connects nothing.
type Ref struct{ items []refItem }

type refItem struct {
	raw    string // a reference as in a spec: NODE.OUTPUT, a path, a URL
	origin string // the field of the user's file it came from ("" for the method)
	kind   string // the kind of artifact declared by the method input or stage output
}

// Empty reports whether r connects nothing.
func (r Ref) Empty() bool { return len(r.items) == 0 }

// NodeBuilder adds to one node; see Builder.
type NodeBuilder struct {
	b       *Builder
	spec    NodeSpec
	origins map[string]string // field under nodes.NAME -> user field
}

// Name is the spec's name (used to name models in the registry).
func (b *Builder) Name() string { return b.name }

// Params are the method parameters, resolved and validated.
func (b *Builder) Params() stages.Params { return b.params }

// IsSet reports whether the user set the method parameter name (rather
// than leaving its default).
func (b *Builder) IsSet(name string) bool { return b.set[name] }

// Has reports whether the user connected the method input name.
func (b *Builder) Has(input string) bool { return !b.In(input).Empty() }

// Declares reports whether the method declares the input name: for code
// that several methods share and that only some of them give that input.
func (b *Builder) Declares(input string) bool {
	_, ok := b.method.Input(input)
	return ok
}

// In returns the method input name as the user connected it; an optional
// input left out gives the empty Ref, which Input ignores.
func (b *Builder) In(input string) Ref {
	decl, ok := b.method.Input(input)
	if !ok {
		b.bug("reads input %q, which it does not declare (inputs: %s)", input, b.method.inputNames())
		return Ref{}
	}
	r := Ref{items: slices.Clone(b.inputs[input].items)}
	for i := range r.items {
		r.items[i].kind = decl.Kind
	}
	return r
}

// Errorf reports a problem with the user's values at field of the spec,
// "params.NAME" or "inputs.NAME" ("" for the method line), e.g. two
// parameters that exclude each other. Build goes on; the call fails.
func (b *Builder) Errorf(field, format string, args ...any) {
	b.errs = append(b.errs, builderError{field, fmt.Sprintf(format, args...)})
}

func (b *Builder) bug(format string, args ...any) {
	b.Errorf("", "method %s (a bug in the method): %s", b.method.Name, fmt.Sprintf(format, args...))
}

// Node adds the node name running stage (use the stage's exported name
// constant, e.g. tagger.StageTrain).
func (b *Builder) Node(name, stage string) *NodeBuilder {
	n := &NodeBuilder{b: b, spec: NodeSpec{Name: name, Stage: stage, Params: map[string]any{},
		Inputs: map[string][]string{}, FanOut: map[string][]any{}}, origins: map[string]string{}}
	switch {
	case !nodeNameRE.MatchString(name):
		b.bug("node name %q is not lower-case letters, digits, '_' and '-'", name)
	case b.byName[name] != nil:
		b.bug("makes the node %s twice", name)
	default:
		b.nodes = append(b.nodes, n)
		b.byName[name] = n
	}
	return n
}

// Lookup returns the node name added so far, or nil: for a node that
// several steps share and the first to need it adds.
func (b *Builder) Lookup(name string) *NodeBuilder { return b.byName[name] }

// Name is the node's name.
func (n *NodeBuilder) Name() string { return n.spec.Name }

// Stage is the name of the node's stage.
func (n *NodeBuilder) Stage() string { return n.spec.Stage }

// Set sets a stage parameter to a value the method chose.
func (n *NodeBuilder) Set(param string, value any) *NodeBuilder {
	n.spec.Params[param] = value
	delete(n.origins, "params."+param)
	return n
}

// Pass sets stage parameters to the method parameters of the same names.
func (n *NodeBuilder) Pass(params ...string) *NodeBuilder {
	for _, p := range params {
		n.PassAs(p, p)
	}
	return n
}

// PassAs sets the stage parameter param to the method parameter
// methodParam; an error in the value is reported at the method parameter.
func (n *NodeBuilder) PassAs(param, methodParam string) *NodeBuilder {
	if _, ok := n.b.method.Param(methodParam); !ok {
		n.b.bug("passes parameter %q, which it does not declare", methodParam)
		return n
	}
	n.spec.Params[param] = n.b.params.Map()[methodParam]
	n.origins["params."+param] = "params." + methodParam
	return n
}

// Input connects the input port to refs, in order, leaving out empty ones
// and any reference given twice (train and dev read from the same
// directory are one artifact). A port with no reference stays unconnected.
// Connecting an artifact of another kind than the port's is a bug of the
// method, reported at once.
func (n *NodeBuilder) Input(port string, refs ...Ref) *NodeBuilder {
	var want *stages.Port
	if st, ok := stages.Lookup(n.spec.Stage); ok {
		if p, ok := st.Input(port); ok && p.Kind != "" {
			want = &p
		}
	}
	for _, r := range refs {
		for _, it := range r.items {
			if want != nil && it.kind != "" && !want.Takes(it.kind) {
				n.b.bug("connects %s (a %s) to input %s of node %s, which takes a %s", it.raw, it.kind, port, n.spec.Name, want.Kind)
				continue
			}
			if slices.Contains(n.spec.Inputs[port], it.raw) {
				continue
			}
			if it.origin != "" {
				if len(n.spec.Inputs[port]) == 0 {
					n.origins["inputs."+port] = it.origin
				}
				n.origins[fmt.Sprintf("inputs.%s.%d", port, len(n.spec.Inputs[port]))] = it.origin
			}
			n.spec.Inputs[port] = append(n.spec.Inputs[port], it.raw)
		}
	}
	return n
}

// Queue sends the node to the cpu or gpu workers.
func (n *NodeBuilder) Queue(q string) *NodeBuilder {
	n.spec.Queue = q
	return n
}

// FanOut makes one node per value of the stage parameter param (or of a
// key the node's producers fan out over, to pair with their copies), as
// `fan_out:` in a spec does. It replaces a value of param that the method
// set or passed before (a spec may not give both).
func (n *NodeBuilder) FanOut(param string, values ...any) *NodeBuilder {
	n.spec.FanOut[param] = values
	delete(n.spec.Params, param)
	delete(n.origins, "params."+param)
	return n
}

// Out refers to the node's output (as NODE.OUTPUT in a spec).
func (n *NodeBuilder) Out(output string) Ref {
	it := refItem{raw: n.spec.Name + "." + output}
	if st, ok := stages.Lookup(n.spec.Stage); ok {
		if p, ok := st.Output(output); ok {
			it.kind = p.Kind
		}
	}
	return Ref{items: []refItem{it}}
}
