package mockserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/synthgen/synthgen/mockserver/hiddenstates"
)

// withHiddenStates mounts the extraction endpoint when Options.HiddenStates
// names a directory, and makes every chat request leave the file of its
// prompt there, as the connector does for a generation request: a client
// must clean up what it did not ask for.
func (s *Server) withHiddenStates(chat http.Handler) http.Handler {
	if s.opts.HiddenStates.Dir == "" {
		return chat
	}
	s.hidden = hiddenstates.New(s.opts.HiddenStates)
	s.mux.Handle("POST /v1/completions", s.hidden)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(body, &req) == nil {
			var contents []string
			for _, m := range req.Messages {
				var c string
				if json.Unmarshal(m.Content, &c) == nil {
					contents = append(contents, c)
				}
			}
			ids := PromptTokenIDs(contents...)
			ids64 := make([]int64, len(ids))
			for i, v := range ids {
				ids64[i] = int64(v)
			}
			_, _ = s.hidden.Begin(ids64)
		}
		chat.ServeHTTP(w, r)
	})
}

// HiddenStates is the extraction server, nil without Options.HiddenStates.Dir.
func (s *Server) HiddenStates() *hiddenstates.Server { return s.hidden }
