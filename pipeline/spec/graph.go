package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nerflow/nerflow/stages"
)

// Graph is a validated spec with fan-out expanded: the nodes the engine
// runs, in a topological order. It is what a run stores, so it is plain JSON.
type Graph struct {
	Name  string  `json:"name"`
	Nodes []*Node `json:"nodes"`

	index map[string]*Node
}

// Node is one executable node of a graph.
type Node struct {
	// ID is the spec node's name, followed for fanned-out nodes by their
	// assignment: "train[seed=3]".
	ID string `json:"id"`
	// Name is the spec node it came from.
	Name    string `json:"name"`
	Stage   string `json:"stage"`
	Version int    `json:"version"`
	// Params are the resolved parameters as canonical JSON (part of the
	// node key).
	Params json.RawMessage `json:"params"`
	// FanOut is this node's assignment of fanned-out parameters.
	FanOut     map[string]any `json:"fan_out,omitempty"`
	Queue      string         `json:"queue"`
	Timeout    time.Duration  `json:"timeout,omitempty"`
	MaxRetries int            `json:"max_retries"`
	// Inputs in port order, then in the order the spec lists them.
	Inputs   []Input  `json:"inputs,omitempty"`
	Parents  []string `json:"parents,omitempty"`
	Children []string `json:"children,omitempty"`
}

// Input connects an input port to another node's output or to an external
// dataset.
type Input struct {
	Port   string `json:"port"`
	Node   string `json:"node,omitempty"`
	Output string `json:"output,omitempty"`
	// Dataset is an absolute local path or a store URL.
	Dataset string `json:"dataset,omitempty"`
}

// Node returns the node with the given ID.
func (g *Graph) Node(id string) (*Node, bool) {
	if g.index == nil {
		g.reindex()
	}
	n, ok := g.index[id]
	return n, ok
}

func (g *Graph) reindex() {
	g.index = make(map[string]*Node, len(g.Nodes))
	for _, n := range g.Nodes {
		g.index[n.ID] = n
	}
}

// Roots are the nodes without parents.
func (g *Graph) Roots() []*Node {
	var out []*Node
	for _, n := range g.Nodes {
		if len(n.Parents) == 0 {
			out = append(out, n)
		}
	}
	return out
}

// Datasets lists the distinct external datasets the graph reads.
func (g *Graph) Datasets() []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in.Dataset != "" && !seen[in.Dataset] {
				seen[in.Dataset] = true
				out = append(out, in.Dataset)
			}
		}
	}
	return out
}

// UnmarshalGraph decodes a graph stored as JSON.
func UnmarshalGraph(b []byte) (*Graph, error) {
	var g Graph
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("decoding pipeline graph: %w", err)
	}
	g.reindex()
	return &g, nil
}

// node is a spec node during expansion.
type node struct {
	spec   NodeSpec
	stage  *stages.Stage
	keys   []string         // fan-out keys, sorted
	values map[string][]any // converted fan-out values
	copies []*Node          // expanded nodes, in assignment order
	assign []map[string]any // assignment of each copy
	refs   map[string][]ref // port -> references
	// matchOnly marks fan-out keys that are not parameters of the stage.
	matchOnly map[string]bool
}

// paramsFor returns the raw parameters of copy i: the spec's, plus the
// copy's fan-out values of the keys that are parameters.
func (n *node) paramsFor(i int) map[string]any {
	raw := maps.Clone(n.spec.Params)
	for k, v := range n.assign[i] {
		if !n.matchOnly[k] {
			raw[k] = v
		}
	}
	return raw
}

// producerFansOut reports whether a node n reads from fans out over key.
func producerFansOut(n *node, byName map[string]*node, key string) bool {
	for _, refs := range n.refs {
		for _, r := range refs {
			if p := byName[r.node]; p != nil {
				if _, ok := p.spec.FanOut[key]; ok {
					return true
				}
			}
		}
	}
	return false
}

type ref struct {
	raw     string
	node    string // producer spec node
	output  string
	dataset string
}

// Expand validates the spec against the stage registry and expands fan-out.
// It reports every problem it finds (unknown stage, unknown or mistyped
// parameter, unconnected or unknown input, missing dataset, cycle, fan-in
// mismatch) as Errors naming the node and field at fault.
func (s *Spec) Expand() (*Graph, error) {
	var errs Errors
	byName := map[string]*node{}
	var order []*node
	for _, ns := range s.Nodes {
		n := &node{spec: ns, values: map[string][]any{}, refs: map[string][]ref{}}
		byName[ns.Name] = n
		order = append(order, n)
		st, ok := stages.Lookup(ns.Stage)
		if !ok {
			if ns.Stage != "" {
				errs = append(errs, s.errorf("nodes."+ns.Name+".stage", "unknown stage %q (list them with `nerflow stages`)", ns.Stage))
			}
			continue
		}
		n.stage = st
	}
	// Input references, then parameters and fan-out, of each node on its
	// own (fan-out keys may refer to the producers' fan-out).
	for _, n := range order {
		if n.stage != nil {
			errs = append(errs, s.checkInputs(n, byName)...)
		}
	}
	for _, n := range order {
		if n.stage != nil {
			errs = append(errs, s.checkFanOut(n, byName)...)
		}
	}
	if len(errs) > 0 {
		return nil, errs.sorted()
	}
	sorted, cycle := topoSort(order)
	if cycle != nil {
		first := cycle[0]
		return nil, Errors{s.errorf("nodes."+first.spec.Name+".inputs", "cycle: %s", cycleString(cycle))}
	}
	g := &Graph{Name: s.Name}
	for _, n := range sorted {
		errs = append(errs, s.expandNode(n, byName, g)...)
	}
	if len(errs) > 0 {
		return nil, errs.sorted()
	}
	g.reindex()
	for _, n := range g.Nodes {
		for _, p := range n.Parents {
			parent := g.index[p]
			parent.Children = append(parent.Children, n.ID)
		}
	}
	return g, nil
}

// checkFanOut converts the fan-out values of n and builds its assignments.
// A fan-out key is normally a parameter of the stage; it may also be a key
// that one of the node's producers fans out over, without being a
// parameter: the copies then only pair up with the producers' copies (an
// evaluation per seed of a stage that has no seed).
func (s *Spec) checkFanOut(n *node, byName map[string]*node) Errors {
	var errs Errors
	path := "nodes." + n.spec.Name
	n.matchOnly = map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(n.spec.FanOut)) {
		p, ok := n.stage.Param(k)
		if !ok {
			if !producerFansOut(n, byName, k) {
				errs = append(errs, s.errorf(path+".fan_out."+k, "stage %s has no parameter %q, and none of its inputs fans out over it", n.stage.Name, k))
				continue
			}
			n.matchOnly[k] = true
			n.values[k] = n.spec.FanOut[k]
			n.keys = append(n.keys, k)
			continue
		}
		if _, dup := n.spec.Params[k]; dup {
			errs = append(errs, s.errorf(path+".params."+k, "is also fanned out: set it in params or in fan_out, not both"))
			continue
		}
		seen := map[string]bool{}
		for i, raw := range n.spec.FanOut[k] {
			v, err := p.Convert(raw)
			if err != nil {
				errs = append(errs, s.errorf(fmt.Sprintf("%s.fan_out.%s.%d", path, k, i), "param %s: %v", k, err))
				continue
			}
			if f := formatValue(v); seen[f] {
				errs = append(errs, s.errorf(fmt.Sprintf("%s.fan_out.%s.%d", path, k, i), "value %s listed twice", f))
			} else {
				seen[f] = true
			}
			n.values[k] = append(n.values[k], v)
		}
		n.keys = append(n.keys, k)
	}
	if len(errs) > 0 {
		return errs
	}
	// Assignments: the cartesian product, first key varying slowest.
	n.assign = []map[string]any{{}}
	for _, k := range n.keys {
		var next []map[string]any
		for _, a := range n.assign {
			for _, v := range n.values[k] {
				b := maps.Clone(a)
				b[k] = v
				next = append(next, b)
			}
		}
		n.assign = next
	}
	// Resolve the parameters once with the first assignment, which checks
	// every non-fanned parameter (fanned ones were checked above).
	if _, err := n.stage.ResolveParams(n.paramsFor(0)); err != nil {
		return s.paramErrors(path+".params", err)
	}
	return nil
}

// paramErrors turns the errors of ResolveParams into one Error per
// parameter, each at its own line; path is where the parameters are
// ("nodes.train.params", or "params" for a method call's).
func (s *Spec) paramErrors(path string, err error) Errors {
	var pes stages.ParamErrors
	if pe, ok := err.(*stages.ParamError); ok {
		pes = stages.ParamErrors{pe}
	} else if !errors.As(err, &pes) {
		return Errors{s.errorf(path, "%v", err)}
	}
	var errs Errors
	for _, pe := range pes {
		errs = append(errs, s.errorf(path+"."+pe.Param, "%v", pe.Err))
	}
	return errs
}

func (s *Spec) checkInputs(n *node, byName map[string]*node) Errors {
	var errs Errors
	path := "nodes." + n.spec.Name + ".inputs"
	for _, port := range slices.Sorted(maps.Keys(n.spec.Inputs)) {
		pp := path + "." + port
		decl, ok := n.stage.Input(port)
		if !ok {
			errs = append(errs, s.errorf(pp, "stage %s has no input %q (inputs: %s)", n.stage.Name, port, portNames(n.stage.Inputs)))
			continue
		}
		refs := n.spec.Inputs[port]
		if len(refs) > 1 && !decl.Many {
			errs = append(errs, s.errorf(pp, "input %s of stage %s takes one artifact, got a list of %d", port, n.stage.Name, len(refs)))
		}
		for i, raw := range refs {
			rp := pp
			if len(refs) > 1 {
				rp = fmt.Sprintf("%s.%d", pp, i)
			}
			r, err := s.parseRef(raw, byName)
			if err != nil {
				errs = append(errs, s.errorf(rp, "%v", err))
				continue
			}
			n.refs[port] = append(n.refs[port], r)
		}
	}
	for _, p := range n.stage.Inputs {
		if _, ok := n.spec.Inputs[p.Name]; !ok && !p.Optional {
			errs = append(errs, s.errorf("nodes."+n.spec.Name, "input %q of stage %s is not connected (inputs: %s)", p.Name, n.stage.Name, portNames(n.stage.Inputs)))
		}
	}
	return errs
}

// parseRef reads one input reference: a store URL (contains "://"), a local
// path (starts with "/", "./", "../" or "~/"), or NODE[.OUTPUT].
func (s *Spec) parseRef(raw string, byName map[string]*node) (ref, error) {
	r := ref{raw: raw}
	switch {
	case strings.Contains(raw, "://"):
		r.dataset = raw
		return r, nil
	case strings.HasPrefix(raw, "/") || strings.HasPrefix(raw, "./") || strings.HasPrefix(raw, "../") || strings.HasPrefix(raw, "~/"):
		p := raw
		if strings.HasPrefix(p, "~/") {
			home, err := os.UserHomeDir()
			if err != nil {
				return r, err
			}
			p = filepath.Join(home, p[2:])
		} else if !filepath.IsAbs(p) {
			p = filepath.Join(s.Dir, p)
		}
		if _, err := os.Stat(p); err != nil {
			return r, fmt.Errorf("dataset %s: %w", raw, unwrapPathError(err))
		}
		r.dataset = p
		return r, nil
	}
	name, output, _ := strings.Cut(raw, ".")
	prod, ok := byName[name]
	if !ok {
		return r, fmt.Errorf("%q is not a node (references are NODE.OUTPUT; paths start with ./ or /; store URLs with SCHEME://)", raw)
	}
	r.node = name
	if prod.stage == nil {
		return r, nil // its unknown stage is reported on its own
	}
	if output == "" {
		if len(prod.stage.Outputs) != 1 {
			return r, fmt.Errorf("node %s (stage %s) has %d outputs: name one as %s.OUTPUT (%s)", name, prod.stage.Name, len(prod.stage.Outputs), name, portNames(prod.stage.Outputs))
		}
		output = prod.stage.Outputs[0].Name
	}
	if _, ok := prod.stage.Output(output); !ok {
		return r, fmt.Errorf("node %s (stage %s) has no output %q (outputs: %s)", name, prod.stage.Name, output, portNames(prod.stage.Outputs))
	}
	r.output = output
	return r, nil
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func portNames(ps []stages.Port) string {
	if len(ps) == 0 {
		return "none"
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// topoSort orders spec nodes so that producers come first, keeping file
// order among independent nodes; it returns a cycle when there is one.
func topoSort(order []*node) ([]*node, []*node) {
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[*node]int{}
	byName := map[string]*node{}
	for _, n := range order {
		byName[n.spec.Name] = n
	}
	var out []*node
	var stack []*node
	var cycle []*node
	var visit func(n *node) bool
	visit = func(n *node) bool {
		switch state[n] {
		case done:
			return true
		case visiting:
			i := slices.Index(stack, n)
			cycle = append(slices.Clone(stack[i:]), n)
			return false
		}
		state[n] = visiting
		stack = append(stack, n)
		for _, port := range slices.Sorted(maps.Keys(n.refs)) {
			for _, r := range n.refs[port] {
				if r.node != "" && !visit(byName[r.node]) {
					return false
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		out = append(out, n)
		return true
	}
	for _, n := range order {
		if !visit(n) {
			return nil, cycle
		}
	}
	return out, nil
}

func cycleString(c []*node) string {
	names := make([]string, len(c))
	for i, n := range c {
		names[i] = n.spec.Name
	}
	return strings.Join(names, " -> ")
}

// expandNode creates the copies of n and wires their inputs. A reference to
// a fanned-out producer matches the producer's copies that agree with the
// consumer's copy on the fan-out keys they share; when several match, that
// is a fan-in, and the input port must accept many artifacts.
func (s *Spec) expandNode(n *node, byName map[string]*node, g *Graph) Errors {
	var errs Errors
	path := "nodes." + n.spec.Name
	for _, port := range slices.Sorted(maps.Keys(n.refs)) {
		for _, r := range n.refs[port] {
			if r.node == "" {
				continue
			}
			prod := byName[r.node]
			for _, k := range n.keys {
				pv, shared := prod.values[k]
				if shared && !sameValues(pv, n.values[k]) {
					errs = append(errs, s.errorf(path+".fan_out."+k, "fan-in mismatch: %s fans out over %s = %s but %s over %s = %s: shared fan-out keys need the same values",
						n.spec.Name, k, formatList(n.values[k]), prod.spec.Name, k, formatList(pv)))
				}
			}
			decl, _ := n.stage.Input(port)
			if m := matching(prod, n, 0); len(prod.assign) > 0 && len(m) > 1 && !decl.Many {
				errs = append(errs, s.errorf(path+".inputs."+port, "fan-in mismatch: %s fans out into %d nodes over %s, but input %s of stage %s takes one artifact (fan %s out over the same keys, or use a stage whose input accepts many)",
					prod.spec.Name, len(m), strings.Join(unsharedKeys(prod, n), ", "), port, n.stage.Name, n.spec.Name))
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	for i, a := range n.assign {
		params, err := n.stage.ResolveParams(n.paramsFor(i))
		if err != nil {
			return s.paramErrors(path+".params", err)
		}
		retries := n.stage.MaxRetries()
		if n.spec.Retries != nil {
			retries = *n.spec.Retries
		}
		timeout := n.stage.Timeout
		if n.spec.Timeout > 0 {
			timeout = n.spec.Timeout
		}
		queue := n.stage.DefaultQueue()
		if n.spec.Queue != "" {
			queue = n.spec.Queue
		}
		out := &Node{
			ID: nodeID(n.spec.Name, n.keys, a), Name: n.spec.Name, Stage: n.stage.Name, Version: n.stage.Version,
			Params: params.Canonical(), Queue: queue, Timeout: timeout, MaxRetries: retries,
		}
		if len(a) > 0 {
			out.FanOut = map[string]any{}
			for k, v := range a {
				out.FanOut[k] = jsonValue(v)
			}
		}
		parents := map[string]bool{}
		for _, port := range slices.Sorted(maps.Keys(n.refs)) {
			for _, r := range n.refs[port] {
				if r.dataset != "" {
					out.Inputs = append(out.Inputs, Input{Port: port, Dataset: r.dataset})
					continue
				}
				prod := byName[r.node]
				for _, j := range matching(prod, n, i) {
					pid := prod.copies[j].ID
					out.Inputs = append(out.Inputs, Input{Port: port, Node: pid, Output: r.output})
					if !parents[pid] {
						parents[pid] = true
						out.Parents = append(out.Parents, pid)
					}
				}
			}
		}
		n.copies = append(n.copies, out)
		g.Nodes = append(g.Nodes, out)
	}
	return nil
}

// matching returns the indexes of prod's copies that agree with copy i of
// consumer on their shared fan-out keys.
func matching(prod, consumer *node, i int) []int {
	var out []int
	for j, pa := range prod.assign {
		ok := true
		for k, v := range pa {
			if cv, shared := consumer.assign[i][k]; shared && formatValue(cv) != formatValue(v) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, j)
		}
	}
	return out
}

func unsharedKeys(prod, consumer *node) []string {
	var out []string
	for _, k := range prod.keys {
		if _, shared := consumer.values[k]; !shared {
			out = append(out, k)
		}
	}
	return out
}

func sameValues(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	as, bs := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		as[i], bs[i] = formatValue(a[i]), formatValue(b[i])
	}
	sort.Strings(as)
	sort.Strings(bs)
	return slices.Equal(as, bs)
}

func nodeID(name string, keys []string, a map[string]any) string {
	if len(keys) == 0 {
		return name
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + formatValue(a[k])
	}
	return name + "[" + strings.Join(parts, ",") + "]"
}

func formatValue(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case time.Duration:
		return x.String()
	case []int64, []float64, []string:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return fmt.Sprint(v)
}

func formatList(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = formatValue(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func jsonValue(v any) any {
	if d, ok := v.(time.Duration); ok {
		return d.String()
	}
	return v
}
