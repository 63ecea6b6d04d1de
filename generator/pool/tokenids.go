package pool

import (
	"fmt"

	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/sink"
)

// A server that does not know vLLM's return_token_ids (vLLM before 0.10.2,
// most other servers) ignores it and answers as usual: every record then
// lacks the ids a job asked for, and nothing fails. As with the reasoning
// check (reasoning.go), the Engine looks at a run's first answers and says
// so once, early; generation.require_token_ids makes it fatal.

// TokenIDsHint is what to do about a *NoTokenIDsError on a server of kind
// k: vLLM's ids came in 0.10.2; the other servers' chat answers do not
// carry them at all.
func TokenIDsHint(k promscrape.Kind) string {
	const off = "or set generation.return_token_ids: false to keep the text alone"
	switch k {
	case promscrape.KindVLLM:
		return "vLLM before 0.10.2 ignores return_token_ids: serve the model with vLLM 0.10.2 or later, which answers with prompt_token_ids and token_ids, " + off
	case promscrape.KindSGLang:
		return "SGLang does not answer vLLM's return_token_ids: serve the model with vLLM 0.10.2 or later for the ids, " + off
	case promscrape.KindLlamaCpp:
		return "llama.cpp's llama-server does not answer vLLM's return_token_ids: serve the model with vLLM 0.10.2 or later for the ids, " + off
	}
	return "serve the model with vLLM 0.10.2 or later, which answers return_token_ids with prompt_token_ids and token_ids, " + off
}

// NoTokenIDsError says a run's first answers came without token ids
// although the requests asked for them.
type NoTokenIDsError struct {
	Checked int             // answers looked at, none with ids
	Server  promscrape.Kind // the kind of server that answered (TokenIDsPolicy.Server)
}

// Hint is what to do about it on its kind of server.
func (e *NoTokenIDsError) Hint() string { return TokenIDsHint(e.Server) }

func (e *NoTokenIDsError) Error() string {
	return fmt.Sprintf("none of the first %d answers carries token ids (prompt_token_ids, token_ids) although generation.return_token_ids asks for them: the server ignores return_token_ids", e.Checked)
}

// TokenIDsPolicy is what the Engine does about a server that ignores
// return_token_ids.
type TokenIDsPolicy struct {
	Sample  int                    // first answers to read; 0: no check (no ids asked)
	Require bool                   // fatal: drain, and Run returns the error
	OnFound func(*NoTokenIDsError) // told once, from the writer goroutine
	Server  promscrape.Kind        // the run's server, named in the hint
}

// tokenIDsCheck reads the first want answers a run writes (or all, when
// fewer come): one with ids settles it; none among them is the error. The
// Engine's writer goroutine owns it.
type tokenIDsCheck struct {
	want, seen int
	decided    bool
	server     promscrape.Kind // told to the error
}

// observe counts rec; it returns the error once want answers came without
// ids, nil otherwise (and nil ever after).
func (c *tokenIDsCheck) observe(rec *sink.Record) *NoTokenIDsError {
	if c == nil || c.decided {
		return nil
	}
	if hasTokenIDs(rec) {
		c.decided = true
		return nil
	}
	c.seen++
	if c.seen < c.want {
		return nil
	}
	c.decided = true
	return &NoTokenIDsError{Checked: c.seen, Server: c.server}
}

// end decides on the answers seen when the run wrote fewer than want.
func (c *tokenIDsCheck) end() *NoTokenIDsError {
	if c == nil || c.decided || c.seen == 0 {
		return nil
	}
	c.decided = true
	return &NoTokenIDsError{Checked: c.seen, Server: c.server}
}

// RefusedTokenIDsError says a run left answers unwritten because they came
// without the ids generation.require_token_ids requires (after the first
// answers had them: a replica that ignores return_token_ids among others
// that do): the run is not done, and a resume asks them again.
type RefusedTokenIDsError struct {
	Answers int
}

func (e *RefusedTokenIDsError) Error() string {
	return fmt.Sprintf("%d answers came without token ids although generation.require_token_ids requires them: not written, a resume asks them again", e.Answers)
}

// refusedNoIDs reports whether rec is an answer without the ids that
// generation.require_token_ids requires: it is not written, so that no
// record of the directory lacks them (export --format speculators needs
// every one) and a resume asks the key again.
func (e *Engine) refusedNoIDs(rec *sink.Record) bool {
	return e.opts.TokenIDs.Require && e.opts.Sampling.ReturnTokenIDs && !hasTokenIDs(rec)
}

// hasTokenIDs reports whether any answer of rec came with ids.
func hasTokenIDs(rec *sink.Record) bool {
	if rec.TokenIDs != nil || rec.PromptTokenIDs != nil {
		return true
	}
	for i := range rec.Turns {
		if rec.Turns[i].TokenIDs != nil || rec.Turns[i].PromptTokenIDs != nil {
			return true
		}
	}
	return false
}

// foundNoIDs acts on what the token ids check found (nil: nothing), as
// found does for the reasoning check. The writer goroutine calls it.
func (e *Engine) foundNoIDs(err *NoTokenIDsError) {
	if err == nil {
		return
	}
	if e.opts.TokenIDs.OnFound != nil {
		e.opts.TokenIDs.OnFound(err)
	}
	if e.opts.TokenIDs.Require {
		if e.fatal == nil {
			e.fatal = err
		}
		e.Drain()
	}
}
