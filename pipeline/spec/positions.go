package spec

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// positions maps a field path ("nodes.train.params.lr", list items by
// index: "nodes.train.fan_out.seed.2") to its line in the spec file. Viper
// gives the values but forgets where they were; this index lets every error
// name its line.
type positions map[string]int

// indexYAML parses data into a position index and returns the node names in
// file order (viper's maps have none).
func indexYAML(data []byte) (positions, []string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, syntaxError(data, err)
	}
	pos := positions{}
	var order []string
	if len(doc.Content) == 0 {
		return pos, nil, nil
	}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				// Viper lower-cases keys; index them the same way.
				p := strings.ToLower(k.Value)
				if path != "" {
					p = path + "." + p
				}
				pos[p] = k.Line
				if path == "nodes" {
					order = append(order, strings.ToLower(k.Value))
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := path + "." + strconv.Itoa(i)
				pos[p] = c.Line
				walk(c, p)
			}
		case yaml.AliasNode:
			if n.Alias != nil {
				walk(n.Alias, path)
			}
		}
	}
	walk(doc.Content[0], "")
	return pos, order, nil
}

// yamlLineRE matches the line yaml.v3 puts in its messages.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError locates a YAML syntax error. yaml.v3 reports the line where
// the enclosing construct began (a bad indent on line 7 of a mapping opened
// on line 3 is "line 3"), so the line given is the first at which the file,
// cut after it, stops parsing: the line that broke it.
func syntaxError(data []byte, err error) *lineError {
	msg := yamlLineRE.ReplaceAllString(err.Error(), "")
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
	}
	lines := strings.SplitAfter(string(data), "\n")
	for k := 1; k <= len(lines); k++ {
		var n yaml.Node
		if yaml.Unmarshal([]byte(strings.Join(lines[:k], "")), &n) != nil {
			line = k
			break
		}
	}
	return &lineError{line: line, msg: "YAML syntax: " + msg}
}

type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }
