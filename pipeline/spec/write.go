package spec

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/nerflow/nerflow/stages"
)

// YAML writes the spec as a list of nodes, in the syntax of docs/spec.md:
// for a method call, the nodes the method made with the overrides applied.
// Reading it back (from the same directory, for relative paths) gives the
// same graph, so a user can save it and edit it by hand.
func (s *Spec) YAML() ([]byte, error) {
	doc := &yaml.Node{Kind: yaml.MappingNode}
	add := func(m *yaml.Node, key string, v any) error {
		var val yaml.Node
		if err := val.Encode(v); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		flowScalars(&val)
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &val)
		return nil
	}
	if err := add(doc, "name", s.Name); err != nil {
		return nil, err
	}
	nodes := &yaml.Node{Kind: yaml.MappingNode}
	doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "nodes"}, nodes)
	for _, n := range s.Nodes {
		node := &yaml.Node{Kind: yaml.MappingNode}
		nodes.Content = append(nodes.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: n.Name}, node)
		fields := []struct {
			key  string
			val  any
			skip bool
		}{
			{"stage", n.Stage, false},
			{"queue", n.Queue, n.Queue == ""},
			{"fan_out", n.FanOut, len(n.FanOut) == 0},
			{"params", yamlParams(n.Stage, n.Params), len(n.Params) == 0},
			{"inputs", yamlInputs(n.Inputs), len(n.Inputs) == 0},
			{"timeout", n.Timeout.String(), n.Timeout == 0},
			{"retries", n.Retries, n.Retries == nil},
		}
		for _, f := range fields {
			if f.skip {
				continue
			}
			if err := add(node, f.key, f.val); err != nil {
				return nil, fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// flowScalars writes lists of scalars, and small mappings of them, on one
// line, the way one writes them by hand.
func flowScalars(n *yaml.Node) {
	scalars := true
	for _, c := range n.Content {
		flowScalars(c)
		scalars = scalars && c.Kind == yaml.ScalarNode
	}
	if scalars && (n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode && len(n.Content) <= 8) {
		n.Style = yaml.FlowStyle
	}
}

// yamlParams writes parameter values the way a spec would: in the type the
// stage declares (a --set gives strings), durations as Go durations.
func yamlParams(stage string, p map[string]any) map[string]any {
	st, _ := stages.Lookup(stage)
	out := make(map[string]any, len(p))
	for k, v := range p {
		if st != nil {
			if d, ok := st.Param(k); ok {
				if c, err := d.Convert(v); err == nil {
					v = c
				}
			}
		}
		if d, ok := v.(time.Duration); ok {
			v = d.String()
		}
		out[k] = v
	}
	return out
}

// yamlInputs writes one reference as a scalar, several as a list.
func yamlInputs(in map[string][]string) map[string]any {
	out := make(map[string]any, len(in))
	for k, refs := range in {
		if len(refs) == 1 {
			out[k] = refs[0]
		} else {
			out[k] = refs
		}
	}
	return out
}

// Tree draws the graph as an indented tree: each node under the last of
// its parents in run order, with its stage, queue and inputs; a node with
// several parents names the others.
func (g *Graph) Tree() string {
	if g.index == nil {
		g.reindex()
	}
	order := map[string]int{}
	for i, n := range g.Nodes {
		order[n.ID] = i
	}
	under := map[string][]*Node{}
	var roots []*Node
	for _, n := range g.Nodes {
		if len(n.Parents) == 0 {
			roots = append(roots, n)
			continue
		}
		last := slices.MaxFunc(n.Parents, func(a, b string) int { return order[a] - order[b] })
		under[last] = append(under[last], n)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", g.Name)
	var draw func(n *Node, depth int)
	draw = func(n *Node, depth int) {
		indent := strings.Repeat("  ", depth+1)
		fmt.Fprintf(&b, "%s%s  %s  %s", indent, n.ID, n.Stage, n.Queue)
		var ins []string
		for _, in := range n.Inputs {
			from := in.Dataset
			if from == "" {
				from = in.Node + "." + in.Output
			}
			ins = append(ins, in.Port+"<-"+from)
		}
		if len(ins) > 0 {
			fmt.Fprintf(&b, "  (%s)", strings.Join(ins, ", "))
		}
		b.WriteString("\n")
		for _, c := range under[n.ID] {
			draw(c, depth+1)
		}
	}
	for _, r := range roots {
		draw(r, 0)
	}
	return b.String()
}
