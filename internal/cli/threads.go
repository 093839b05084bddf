package cli

import "github.com/spf13/pflag"

// threadsFlag adds --threads to a command that trains or runs nodes (train,
// worker, run): libtorch's threads per operation in every training and
// prediction of the process, for kit.SetThreads. The default shares the
// machine's cores among the process's own trainings, which is right for one
// process per machine; several processes on one machine each take all the
// cores, and OpenMP's busy-waiting threads then slow every one of them down
// many times over, so each should be given its share.
func threadsFlag(fl *pflag.FlagSet, n *int) {
	fl.IntVar(n, "threads", 0, "libtorch and OpenBLAS threads per operation of each training or prediction (0: the cores, shared among this process's running trainings; set it when several processes share a machine)")
}
