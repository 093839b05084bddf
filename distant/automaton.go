package distant

// automaton is an Aho-Corasick automaton over token ids: it finds every
// occurrence of every phrase in a sentence in one left-to-right pass, whatever
// the number of phrases. Byte-string libraries would match inside words and
// across token boundaries; working on interned token ids matches whole tokens
// only and compares one integer per step instead of a string.
//
// Node 0 is the root. Its transitions are a dense table indexed by token id,
// because nearly every step that fails lands back at the root and tries again
// there. Other nodes have few children, stored in CSR form sorted by token.
type automaton struct {
	rootNext []int32 // child of the root per token id; 0 when none (the root is nobody's child)
	nodes    []acNode
	edgeTok  []int32 // node u's children are edgeTok/edgeTo[nodes[u].edges:nodes[u+1].edges]
	edgeTo   []int32
	length   []int32 // tokens in phrase key
}

// acNode keeps together what a scan step reads about a node, so that a step
// costs one cache miss rather than one per field (four nodes fill a line).
type acNode struct {
	edges int32 // first child in edgeTok/edgeTo
	fail  int32 // node of the longest proper suffix of this node's path that is also a path from the root
	out   int32 // phrase ending here, -1 when none
	dict  int32 // nearest node on the fail chain with out >= 0, 0 when none
}

// rawMatch is one phrase occurrence: tokens [start, end) are phrase key.
type rawMatch struct {
	start, end int32
	key        int32
}

// acBuilder accumulates phrases into a trie before the automaton is laid out.
type acBuilder struct {
	next        map[uint64]int32 // (node, token) -> child
	firstChild  []int32
	nextSibling []int32
	tok         []int32 // token on the edge into the node
	depth       []int32
	out         []int32
	vocab       int
	keys        int // 1 + the largest key inserted
}

func newACBuilder(vocabSize int) *acBuilder {
	b := &acBuilder{next: map[uint64]int32{}, vocab: vocabSize}
	b.newNode(-1, 0)
	return b
}

func (b *acBuilder) newNode(tok, depth int32) int32 {
	b.firstChild = append(b.firstChild, 0)
	b.nextSibling = append(b.nextSibling, 0)
	b.tok = append(b.tok, tok)
	b.depth = append(b.depth, depth)
	b.out = append(b.out, -1)
	return int32(len(b.out) - 1)
}

// insert adds a phrase as token ids; key identifies it in matches. Each
// token sequence must be inserted once.
func (b *acBuilder) insert(ids []int32, key int32) {
	u := int32(0)
	for _, t := range ids {
		k := uint64(u)<<32 | uint64(uint32(t))
		c, ok := b.next[k]
		if !ok {
			c = b.newNode(t, b.depth[u]+1)
			b.next[k] = c
			b.nextSibling[c] = b.firstChild[u]
			b.firstChild[u] = c
		}
		u = c
	}
	b.out[u] = key
	b.keys = max(b.keys, int(key)+1)
}

// build lays the trie out for scanning and computes failure links.
func (b *acBuilder) build() *automaton {
	n := len(b.out)
	b.next = nil // the layout below replaces it; let it go before allocating more
	a := &automaton{
		rootNext: make([]int32, b.vocab),
		nodes:    make([]acNode, n+1), // the extra node ends the last node's edges
		edgeTok:  make([]int32, 0, n),
		edgeTo:   make([]int32, 0, n),
		length:   make([]int32, b.keys),
	}
	for c := b.firstChild[0]; c != 0; c = b.nextSibling[c] {
		a.rootNext[b.tok[c]] = c
	}
	var kids []int32
	for u := range n {
		a.nodes[u] = acNode{edges: int32(len(a.edgeTok)), out: b.out[u]}
		if b.out[u] >= 0 {
			a.length[b.out[u]] = b.depth[u]
		}
		if u == 0 {
			continue // the root's children are in rootNext
		}
		kids = kids[:0]
		for c := b.firstChild[u]; c != 0; c = b.nextSibling[c] {
			kids = append(kids, c)
		}
		// Sibling lists are in reverse insertion order; sort by token
		// (insertion sort: most nodes have one or two children).
		for i := 1; i < len(kids); i++ {
			for j := i; j > 0 && b.tok[kids[j]] < b.tok[kids[j-1]]; j-- {
				kids[j], kids[j-1] = kids[j-1], kids[j]
			}
		}
		for _, c := range kids {
			a.edgeTok = append(a.edgeTok, b.tok[c])
			a.edgeTo = append(a.edgeTo, c)
		}
	}
	a.nodes[n] = acNode{edges: int32(len(a.edgeTok)), out: -1}

	// Breadth-first, so a node's fail target (shallower) is final before
	// the node's children need it.
	queue := make([]int32, 0, n)
	for c := b.firstChild[0]; c != 0; c = b.nextSibling[c] {
		queue = append(queue, c) // fail and dict stay 0: the root
	}
	for head := 0; head < len(queue); head++ {
		u := queue[head]
		for e := a.nodes[u].edges; e < a.nodes[u+1].edges; e++ {
			t, v := a.edgeTok[e], a.edgeTo[e]
			f := a.nodes[u].fail
			for {
				if c := a.child(f, t); c != 0 {
					a.nodes[v].fail = c
					break
				}
				if f == 0 {
					break
				}
				f = a.nodes[f].fail
			}
			if fv := a.nodes[v].fail; a.nodes[fv].out >= 0 {
				a.nodes[v].dict = fv
			} else {
				a.nodes[v].dict = a.nodes[fv].dict
			}
			queue = append(queue, v)
		}
	}
	return a
}

// child returns u's child by token t, or 0 when there is none.
func (a *automaton) child(u, t int32) int32 {
	if u == 0 {
		return a.rootNext[t]
	}
	return a.below(u, t)
}

// below returns the child by token t of u, which is not the root, or 0.
func (a *automaton) below(u, t int32) int32 {
	lo, hi := a.nodes[u].edges, a.nodes[u+1].edges
	for hi-lo > 8 {
		mid := lo + (hi-lo)/2
		if a.edgeTok[mid] < t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	for ; lo < hi; lo++ {
		if a.edgeTok[lo] == t {
			return a.edgeTo[lo]
		}
		if a.edgeTok[lo] > t {
			return 0
		}
	}
	return 0
}

// tokenRef is a corpus token as the automaton sees it: its id, or -1 for a
// token no phrase contains, and the root's child for it, looked up with
// the id so that the scan need not visit the root's table.
type tokenRef struct {
	id, root int32
}

var unknownToken = tokenRef{id: -1}

// scan appends every phrase occurrence in a sentence to dst.
func (a *automaton) scan(dst []rawMatch, toks []tokenRef) []rawMatch {
	s := int32(0)
	for j, t := range toks {
		if t.id < 0 {
			s = 0 // no phrase goes through this token
			continue
		}
		for {
			if s == 0 {
				s = t.root
				break
			}
			if c := a.below(s, t.id); c != 0 {
				s = c
				break
			}
			s = a.nodes[s].fail
		}
		o := s
		if a.nodes[o].out < 0 {
			o = a.nodes[o].dict
		}
		for o != 0 {
			nd := &a.nodes[o]
			dst = append(dst, rawMatch{start: int32(j+1) - a.length[nd.out], end: int32(j + 1), key: nd.out})
			o = nd.dict
		}
	}
	return dst
}

// nodes returns the number of trie nodes, root included.
func (a *automaton) size() int { return len(a.nodes) - 1 }
