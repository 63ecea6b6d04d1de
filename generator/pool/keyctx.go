package pool

import (
	"context"

	"github.com/synthgen/synthgen/sink"
)

// keyCtx carries the key a request asks, for a Completer that names its
// requests by key (a batch's custom_id: generator/batch).
type keyCtx struct{}

// KeyOf is the key of the request whose context ctx is, when the Engine
// runs with Options.KeyedContext.
func KeyOf(ctx context.Context) (sink.Key, bool) {
	k, ok := ctx.Value(keyCtx{}).(sink.Key)
	return k, ok
}
