package hub

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: a
// download or a connection left running after its dataset was closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
