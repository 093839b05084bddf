// Package cheap makes the C heap hold freed memory, for the tests of
// package allocator (cgo cannot be used in a _test.go file).
package cheap

/*
#include <stdlib.h>
#include <string.h>

// nerflow_hold_and_free mallocs n bytes in 64 KiB blocks (below glibc's
// mmap threshold: they come from the heap), touches them, mallocs a small
// block after them, which keeps the heap from shrinking back, and frees
// the large blocks. It returns the small block, for nerflow_unpin.
static void *nerflow_hold_and_free(size_t n) {
	size_t count = n / 65536;
	void **blocks = malloc(count * sizeof(void *));
	if (blocks == NULL) return NULL;
	for (size_t i = 0; i < count; i++) {
		blocks[i] = malloc(65536);
		if (blocks[i] != NULL) memset(blocks[i], 1, 65536);
	}
	void *pin = malloc(64);
	for (size_t i = 0; i < count; i++) free(blocks[i]);
	free(blocks);
	return pin;
}
*/
import "C"

import "unsafe"

// HoldAndFree allocates n bytes on the C heap, touches them and frees
// them so that the allocator keeps them; call the returned function to
// free the last small block it keeps allocated.
func HoldAndFree(n int) (unpin func()) {
	pin := C.nerflow_hold_and_free(C.size_t(n))
	return func() { C.free(unsafe.Pointer(pin)) }
}
