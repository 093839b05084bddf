package distant

import (
	"hash/maphash"
	"math/bits"
)

// vocabTable maps the tokens of all phrases to their tokenRefs. It is an
// open-addressing hash table whose slots hold the first 8 bytes and the
// length of their token: a lookup of a short token — most words — reads
// one slot and nothing else, where Go's map reads a control word, a key
// header and the key's bytes, three cache misses when a large gazetteer's
// vocabulary is far bigger than the CPU cache. Longer tokens are confirmed
// against the token's text.
type vocabTable struct {
	seed  maphash.Seed
	slots []vocabSlot // at most 3/4 full
	texts []string    // token text by id
}

type vocabSlot struct {
	head uint64 // the token's first 8 bytes, little-endian, zero-padded
	size uint32 // the token's length + 1; 0 marks an empty slot
	ref  tokenRef
}

// newVocabTable builds the table of distinct tokens: texts[i] has id i and
// the root's child rootNext[i].
func newVocabTable(texts []string, rootNext []int32) *vocabTable {
	n := len(texts)*4/3 + 1
	v := &vocabTable{seed: maphash.MakeSeed(), slots: make([]vocabSlot, n), texts: texts}
	for i, t := range texts {
		j := v.home(t)
		for v.slots[j].size != 0 {
			if j++; j == n {
				j = 0
			}
		}
		v.slots[j] = vocabSlot{head: head(t), size: uint32(len(t)) + 1, ref: tokenRef{id: int32(i), root: rootNext[i]}}
	}
	return v
}

// home maps t's hash onto the slots by multiplication, which, unlike a
// mask, works for any table size.
func (v *vocabTable) home(t string) int {
	hi, _ := bits.Mul64(maphash.String(v.seed, t), uint64(len(v.slots)))
	return int(hi)
}

// head packs the first 8 bytes of t.
func head(t string) uint64 {
	var h uint64
	for i := 0; i < len(t) && i < 8; i++ {
		h |= uint64(t[i]) << (8 * i)
	}
	return h
}

// lookup returns t's ref, or unknownToken when no phrase has the token.
func (v *vocabTable) lookup(t string) tokenRef {
	h, size := head(t), uint32(len(t))+1
	for j := v.home(t); ; {
		s := &v.slots[j]
		switch {
		case s.size == 0:
			return unknownToken
		case s.size == size && s.head == h && (size <= 9 || v.texts[s.ref.id] == t):
			return s.ref
		}
		if j++; j == len(v.slots) {
			j = 0
		}
	}
}
