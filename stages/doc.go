// Package stages is the API for writing pipeline stages, and their registry.
//
// A stage is a named, versioned Go function from typed parameters and named
// input artifacts to named output artifacts. It knows nothing about queues,
// Redis or where it runs: the pipeline engine resolves its parameters,
// fetches its inputs from the artifact store, calls Run on a worker of the
// stage's queue, and caches its outputs under the node key (a digest of the
// stage name and version, the canonical parameters and the input digests).
//
// # Writing a stage
//
// Declare the stage and register it from an init function, the way
// database/sql drivers register themselves; importing the package (usually
// with a blank import in the binary) makes the stage available to specs:
//
//	package distant
//
//	import "github.com/nerflow/nerflow/stages"
//
//	func init() {
//		stages.Register(stages.Stage{
//			Name:    "distant.label",
//			Version: 1, // bump when the outputs of the same inputs change
//			Doc:     "Labels raw sentences by matching gazetteer entries.",
//			Params: []stages.Param{
//				stages.StringParam("scheme", "io", "tagging scheme of the labels", stages.OneOf("io", "bio")),
//				stages.IntParam("max_span", 6, "longest entry matched, in tokens", stages.Range(1, 32)),
//			},
//			Inputs: []stages.Port{
//				{Name: "text", Kind: "corpus", Doc: "unlabeled sentences"},
//				{Name: "gazetteer", Kind: "gazetteer"},
//			},
//			Outputs: []stages.Port{{Name: "labeled", Kind: "corpus"}},
//			Run:     label,
//		})
//	}
//
//	func label(c *stages.Context) error {
//		text, err := c.Input("text").ReadFile("sentences.txt")
//		if err != nil {
//			return err
//		}
//		scheme := c.Params.String("scheme")
//		...
//		c.Progress(done, total, "matching")
//		...
//		w, err := c.Output("labeled").Create("train.txt")
//		if err != nil {
//			return err
//		}
//		// write to w ...
//		return w.Close()
//	}
//
// Rules of the road:
//
//   - Read parameters with the typed getters of c.Params (Int, Float, String,
//     Bool, Duration, Ints, Floats, Strings). Values were validated against
//     the declaration (type, Range, OneOf) before the stage runs.
//   - Read inputs with c.Input(name) (one artifact) or c.Inputs(name) (a
//     Port with Many: the fan-in of a fanned-out node). An Input opens,
//     reads or fetches (to a local directory) the artifact's files.
//   - Write every declared output through c.Output(name): WriteFile,
//     WriteJSON, Create (streaming), AddFile, AddDir (a checkpoint
//     directory); SetMeta and SetSchemaVersion describe it. An output is a
//     small set of named files; when Run returns, Exec commits it as an
//     Artifact (package storage/artifact): a manifest with a content digest,
//     the producer (stage, version, node key, run) and the lineage (the
//     input digests), written to the store after the files.
//   - Inputs are verified: a file whose stored bytes are not those its
//     manifest lists fails to open or read (storage.ErrDigestMismatch).
//   - Use c.Context (c itself is a context.Context) for cancellation, c.Log
//     for logs, c.Device ("cpu", "cuda:0") for where to compute, c.WorkDir()
//     for local scratch space.
//   - Return stages.Permanent(err) for errors a retry cannot fix (bad
//     input); other errors are retried up to Stage.Retries times.
//   - Long stages set Resumable and call c.SaveCheckpoint(dir, step) every
//     so often and c.LoadCheckpoint(dir) at start: when a worker dies, the
//     attempt that replaces it resumes from the last checkpoint.
//
// Unit-test a stage without the engine with Exec and a file store.
package stages
