package kit

/*
int at_grad_set_enabled(int b);
*/
import "C"

import "runtime"

// setGradEnabled sets libtorch's grad mode on the calling OS thread and
// returns the mode it replaces. gotch v0.8.0's GradSetEnabled returns
// garbage for the previous mode (it reads the C int it gets back as an
// 8-byte Go int), so the function of gotch's C API (torch_api.cpp, linked
// into every binary that uses gotch) is called directly, as threads.go
// does for the thread count.
func setGradEnabled(on bool) (prev bool) {
	b := C.int(0)
	if on {
		b = 1
	}
	return C.at_grad_set_enabled(b) == 1
}

// NoGrad runs f with gradient tracking off, and puts the previous mode
// back after: a computation without gradient may run inside another (a
// tagger's frozen language model inside its prediction, or inside a
// training step). libtorch's grad mode belongs to the OS thread, so NoGrad
// holds the goroutine on its thread meanwhile (else it could turn tracking
// off on one thread and back on on another, and a later training on the
// first would fail).
func NoGrad(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev := setGradEnabled(false)
	defer setGradEnabled(prev)
	f()
}
