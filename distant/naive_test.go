package distant

import "strings"

// naiveMatcher is the reference the automaton is tested and benchmarked
// against: at every position it looks up every length up to the longest
// phrase in a hash map of phrase keys. It shares the Matcher's phrase
// numbering and overlap resolution, so both must return identical matches.
type naiveMatcher struct {
	m      *Matcher
	dict   map[string]int32
	maxLen int
	normed []string
	buf    []byte
}

func newNaive(m *Matcher) *naiveMatcher {
	n := &naiveMatcher{m: m, dict: make(map[string]int32, m.NumPhrases()), maxLen: m.stats.MaxTokens}
	for k := range m.NumPhrases() {
		// Cloned so that the map's memory is its own in the benchmark.
		n.dict[strings.Clone(m.key(k))] = int32(k)
	}
	return n
}

func (n *naiveMatcher) match(s *Scanner, tokens []string) []Match {
	n.normed = n.normed[:0]
	for _, t := range tokens {
		n.normed = append(n.normed, n.m.norm.token(t))
	}
	s.raw = s.raw[:0]
	for i := range n.normed {
		n.buf = n.buf[:0]
		for l := 1; l <= n.maxLen && i+l <= len(n.normed); l++ {
			if l > 1 {
				n.buf = append(n.buf, keySep...)
			}
			n.buf = append(n.buf, n.normed[i+l-1]...)
			// m[string(b)] does not allocate.
			if k, ok := n.dict[string(n.buf)]; ok {
				s.raw = append(s.raw, rawMatch{start: int32(i), end: int32(i + l), key: k})
			}
		}
	}
	return s.resolve(len(tokens))
}
