package train

/*
int at_grad_set_enabled(int b);
*/
import "C"

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
