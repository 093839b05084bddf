package cli

import (
	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/train"
)

// threadsFlag adds --threads to a command that runs nodes (worker, run):
// libtorch's threads per operation in every training and prediction of the
// process. The default shares the machine's cores among the process's own
// nodes, which is right for one process per machine; several processes on
// one machine each take all the cores, and OpenMP's busy-waiting threads
// then slow every one of them down many times over, so each should be given
// its share.
func threadsFlag(cmd *cobra.Command, n *int) {
	cmd.Flags().IntVar(n, "threads", 0, "libtorch and OpenBLAS threads per operation of each training or prediction (0: the cores, shared among this process's running nodes; set it when several workers share a machine)")
}

// applyThreads fixes the process's threads per operation from --threads.
func applyThreads(n int) {
	if n > 0 {
		train.SetThreads(n)
	}
}
