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
	rootNext  []int32 // child of the root per token id; 0 when none (the root is nobody's child)
	edgeStart []int32 // node u's children are edgeTok/edgeTo[edgeStart[u]:edgeStart[u+1]]
	edgeTok   []int32
	edgeTo    []int32
	fail      []int32 // longest proper suffix of u's path that is also a path from the root
	out       []int32 // phrase ending at u, -1 when none
	dict      []int32 // nearest node on u's fail chain with out >= 0, 0 when none
	depth     []int32 // tokens on the path to u
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
}

// build lays the trie out for scanning and computes failure links.
func (b *acBuilder) build() *automaton {
	n := len(b.out)
	b.next = nil // the layout below replaces it; let it go before allocating more
	a := &automaton{
		rootNext:  make([]int32, b.vocab),
		edgeStart: make([]int32, n+1),
		edgeTok:   make([]int32, 0, n),
		edgeTo:    make([]int32, 0, n),
		fail:      make([]int32, n),
		out:       b.out,
		dict:      make([]int32, n),
		depth:     b.depth,
	}
	for c := b.firstChild[0]; c != 0; c = b.nextSibling[c] {
		a.rootNext[b.tok[c]] = c
	}
	var kids []int32
	for u := 1; u < n; u++ {
		a.edgeStart[u] = int32(len(a.edgeTok))
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
	a.edgeStart[n] = int32(len(a.edgeTok))

	// Breadth-first, so a node's fail target (shallower) is final before
	// the node's children need it.
	queue := make([]int32, 0, n)
	for c := b.firstChild[0]; c != 0; c = b.nextSibling[c] {
		queue = append(queue, c) // fail and dict stay 0: the root
	}
	for head := 0; head < len(queue); head++ {
		u := queue[head]
		for e := a.edgeStart[u]; e < a.edgeStart[u+1]; e++ {
			t, v := a.edgeTok[e], a.edgeTo[e]
			f := a.fail[u]
			for {
				if c := a.child(f, t); c != 0 {
					a.fail[v] = c
					break
				}
				if f == 0 {
					break
				}
				f = a.fail[f]
			}
			if fv := a.fail[v]; a.out[fv] >= 0 {
				a.dict[v] = fv
			} else {
				a.dict[v] = a.dict[fv]
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
	lo, hi := a.edgeStart[u], a.edgeStart[u+1]
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

// scan appends every phrase occurrence in ids to dst. A negative id is a
// token no phrase contains: it sends the automaton back to the root.
func (a *automaton) scan(dst []rawMatch, ids []int32) []rawMatch {
	s := int32(0)
	for j, t := range ids {
		if t < 0 {
			s = 0
			continue
		}
		for {
			if c := a.child(s, t); c != 0 {
				s = c
				break
			}
			if s == 0 {
				break
			}
			s = a.fail[s]
		}
		o := s
		if a.out[o] < 0 {
			o = a.dict[o]
		}
		for o != 0 {
			dst = append(dst, rawMatch{start: int32(j+1) - a.depth[o], end: int32(j + 1), key: a.out[o]})
			o = a.dict[o]
		}
	}
	return dst
}

// nodes returns the number of trie nodes, root included.
func (a *automaton) nodes() int { return len(a.out) }
