package stages

import (
	"context"
	"errors"
	"testing"
)

// A stage's own failure is permanent, but the error of a cancelled
// execution passes through unmarked so the engine hands the node back.
func TestFailed(t *testing.T) {
	boom := errors.New("loss is NaN")
	c := &Context{Context: context.Background()}
	if err := c.Failed(boom); !IsPermanent(err) || !errors.Is(err, boom) {
		t.Errorf("Failed(%v) = %v, want a permanent error wrapping it", boom, err)
	}
	if err := c.Failed(nil); err != nil {
		t.Errorf("Failed(nil) = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c = &Context{Context: ctx}
	if err := c.Failed(context.Canceled); IsPermanent(err) || !errors.Is(err, context.Canceled) {
		t.Errorf("Failed after cancellation = %v (permanent %v), want the error as is", err, IsPermanent(err))
	}
}
