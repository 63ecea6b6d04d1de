package pool

import (
	"fmt"
	"strings"

	"github.com/synthgen/synthgen/generator/wire"
)

// An answer names the model that wrote it. A replica that lists the job's
// model but answers as another (a wrong checkpoint behind a proxy, a
// server restarted with other flags) would otherwise write its answers into
// the dataset under the job's name, and the run would say done. So each
// answer's model is checked against the job's: a mismatch is a failed
// attempt with the replica named, retried elsewhere like any of the
// replica's failures, never a record.

// sameModel reports whether an answer's model, got, is the job's, want. An
// answer that names none is taken as the job's (some servers omit it), and
// so are the spellings servers give one model: OpenAI answers a request for
// "gpt-4o" as "gpt-4o-2024-08-06" (a dated snapshot of it), and a router or
// proxy may put its provider before the name ("openai/gpt-4o") or leave a
// path's directories out ("/models/qwen3" served as "qwen3").
func sameModel(want, got string) bool {
	if got == "" || want == "" || got == want {
		return true
	}
	if rest, ok := strings.CutPrefix(got, want+"-"); ok && isSnapshot(rest) {
		return true
	}
	return strings.HasSuffix(got, "/"+want) || strings.HasSuffix(want, "/"+got)
}

// isSnapshot reports whether s is the date suffix of a model snapshot:
// 2024-08-06, 20241022 or 0613 (the forms OpenAI and Anthropic use).
func isSnapshot(s string) bool {
	digits := func(t string) bool {
		for _, c := range t {
			if c < '0' || c > '9' {
				return false
			}
		}
		return t != ""
	}
	switch len(s) {
	case 4, 8:
		return digits(s)
	case 10:
		return digits(s[:4]) && s[4] == '-' && digits(s[5:7]) && s[7] == '-' && digits(s[8:])
	}
	return false
}

// modelMismatch is the failed attempt of an answer from another model.
func modelMismatch(url, got, want string) *wire.Error {
	where := "the server"
	if url != "" {
		where = url
	}
	msg := fmt.Sprintf("%s answered as model %q, not the job's %q; the answer is not kept (check the server's --served-model-name, or what serves that address)", where, got, want)
	return &wire.Error{Cause: wire.CauseModel, Message: msg, Retryable: true, Err: fmt.Errorf("%s", msg)}
}
