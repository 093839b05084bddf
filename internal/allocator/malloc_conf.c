// jemalloc's options for nerflow, read by jemalloc at start-up from this
// symbol of the executable (MALLOC_CONF in the environment can still add to
// it). By default jemalloc serves allocations of 8 MB and more from a
// dedicated arena that returns their pages to the kernel as soon as they are
// freed; libtorch allocates and frees such tensors every batch, so each was
// faulted in again: on 5 epochs of the 2,000-sentence training, 1.5 million
// page faults and 3.2 s of system time, against 0.19 million and 0.7 s with
// the threshold off (those sizes then live in the ordinary arenas, whose
// freed pages decay over seconds), for the same resident memory
// (docs/tagger.md, "Memory").
const char *malloc_conf = "oversize_threshold:0";
