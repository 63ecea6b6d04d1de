package mockserver

import (
	"net/http"

	"github.com/synthgen/synthgen/mockserver/hiddenstates"
	"github.com/synthgen/synthgen/mockserver/tokenids"
)

// withHiddenStates mounts the extraction endpoint when Options.HiddenStates
// names a directory, and makes every chat request leave the file of its
// prompt there, as vLLM's connector does for a generation request.
func (s *Server) withHiddenStates(chat http.Handler) http.Handler {
	if s.opts.HiddenStates.Dir == "" {
		return chat
	}
	s.hidden = hiddenstates.New(s.opts.HiddenStates)
	s.mux.Handle("POST /v1/completions", s.hidden)
	return s.hidden.Chat(chat, tokenids.Prompt)
}

// HiddenStates is the extraction server, nil without Options.HiddenStates.Dir.
func (s *Server) HiddenStates() *hiddenstates.Server { return s.hidden }
