//go:build nerflow_teststages

package main

// The engine's test stages (test.emit, test.slow, ...) are compiled in only
// with -tags nerflow_teststages, for the tests that run real worker
// processes.
import _ "github.com/nerflow/nerflow/pipeline/teststages"
