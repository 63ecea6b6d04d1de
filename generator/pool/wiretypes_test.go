package pool

import (
	"testing"

	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/sink"
)

// TestWireMessagesShareMemory: the request's messages are the record's,
// not a copy; none is none.
func TestWireMessagesShareMemory(t *testing.T) {
	msgs := []sink.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "q"}}
	got := wireMessages(msgs)
	if len(got) != 2 || got[1] != (wire.Message{Role: "user", Content: "q"}) {
		t.Fatalf("wireMessages = %+v", got)
	}
	msgs[1].Content = "changed"
	if got[1].Content != "changed" {
		t.Error("the request's messages are a copy")
	}
	if wireMessages(nil) != nil {
		t.Error("no messages became some")
	}
	if recordLogprobs(nil) != nil {
		t.Error("no logprobs became some")
	}
}
