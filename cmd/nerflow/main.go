// Command nerflow trains named-entity taggers from cheap supervision by
// running weak- and semi-supervised NER methods as pipelines of stages.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/nerflow/nerflow/internal/cli"
)

func main() {
	// The first Ctrl-C or SIGTERM cancels the context so that commands can
	// stop cleanly; a second one kills the process the default way.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }()
	os.Exit(cli.Execute(ctx))
}
