// Package gotchop measures what one libtorch operation costs when it goes
// through gotch's Go wrapper, against the same operation called through
// gotch's raw C bindings (libtch) in the same run.
//
// The tagger's CRF and optimizer issue hundreds of small operations a step,
// so a fixed cost per wrapped operation shows up directly in training
// throughput. gotch v0.8.0 gives every tensor handle a 100 KB Go allocation
// (ts.bigStruct, so that the garbage collector runs often enough for
// finalizers to free C memory), plus a generated name, a global map entry
// and a few cgo calls to size it; the benchmark shows how much of a small
// operation that is:
//
//	go test ./bench/gotchop -run '^$' -bench . -benchtime 20000x
package gotchop
