// Package gotchop measures what one libtorch operation costs when it goes
// through gotch's Go wrapper, against the same operation called through
// gotch's raw C bindings (libtch) in the same run.
//
// The tagger's CRF and optimizer issue hundreds of small operations a step,
// so a fixed cost per wrapped operation shows up directly in training
// throughput. gotch v0.8.0 gave every tensor handle a 100 KB Go allocation
// (ts.bigStruct, so that the garbage collector ran often enough for
// finalizers to free C memory) and a few cgo calls to size it, about 125 µs
// per small op against 6 µs for the op itself; scripts/gotch-adapt.sh
// removes both, leaving a name, a table entry and a finalizer (about 1.3
// times the raw call). The benchmark shows what the wrapper costs:
//
//	go test ./bench/gotchop -run '^$' -bench . -benchtime 20000x
package gotchop
