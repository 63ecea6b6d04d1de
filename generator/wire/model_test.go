package wire

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/internal/redact"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"},
		{"https://user:secret@gpu-box:8000/v1", "https://user:xxxxx@gpu-box:8000/v1"},
		{"http://token@host/v1", "http://token@host/v1"}, // a user name alone is not masked by net/url
		{"http://a b@host:%zz/", "(unparsable URL)"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := redact.URL(tc.in); got != tc.want {
			t.Errorf("redact.URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// sleepClock moves only when slept on.
type sleepClock struct{ t time.Time }

func (c *sleepClock) Now() time.Time { return c.t }
func (c *sleepClock) Sleep(ctx context.Context, d time.Duration) bool {
	c.t = c.t.Add(d)
	return ctx.Err() == nil
}

// TestResolveModelSaysHowLongItWaits: a server that is down at start was
// reported with the same line every 30 s, so nobody watching could tell
// whether synthgen would wait for it an hour or give up soon. Each line
// now says how long it has waited and when it gives up.
func TestResolveModelSaysHowLongItWaits(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"object":"error","message":"loading","code":503}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	client := New(Options{BaseURL: srv.URL + "/v1"})
	clock := &sleepClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	var log strings.Builder
	_, err := resolveModelClock(context.Background(), client, srv.URL+"/v1", "", &log, clock)
	var se *ServerError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a ServerError once the wait is over", err)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	line := regexp.MustCompile(`^waiting for the server at ` + regexp.QuoteMeta(srv.URL+"/v1") + `: (\S+) so far, giving up in (\S+) \(.*503.*\)$`)
	if len(lines) < 15 {
		t.Fatalf("%d lines over a 10-minute wait, want one every 30 s or so:\n%s", len(lines), log.String())
	}
	var prevWaited time.Duration
	for i, l := range lines {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %d %q, want %s", i, l, line)
		}
		waited, err1 := time.ParseDuration(m[1])
		left, err2 := time.ParseDuration(m[2])
		if err1 != nil || err2 != nil {
			t.Fatalf("line %q: %v %v", l, err1, err2)
		}
		if waited+left != modelWait || waited <= prevWaited {
			t.Errorf("line %d %q: waited %v + left %v, want them to add up to %v and waited to grow", i, l, waited, left, modelWait)
		}
		prevWaited = waited
	}
	t.Logf("first %q, last %q", lines[0], lines[len(lines)-1])
}

func TestRedactURLIn(t *testing.T) {
	cause := errors.New("dial tcp: connection refused")
	raw := "http://user:secret@gpu-box:8000/metrics"
	err := redact.URLIn(fmt.Errorf("scrape %s: %w", raw, cause), raw)
	if strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "user:xxxxx@gpu-box") {
		t.Errorf("RedactURLIn = %q, want the password masked", err)
	}
	if !errors.Is(err, cause) {
		t.Error("the cause is lost")
	}
	if redact.URLIn(nil, raw) != nil {
		t.Error("nil in, not nil out")
	}
}

// TestResolveModelsContextPerServer: llama.cpp lists its context as
// meta.n_ctx (one slot's, what a request gets), not max_model_len; a job
// against it knows the context as it does against vLLM or SGLang. An older
// llama-server lists only n_ctx_train, the model's training context, which
// its -c may cut: no context is better than a wrong one.
func TestResolveModelsContextPerServer(t *testing.T) {
	tests := []struct {
		file string
		want Model
	}{
		{"models_vllm.json", Model{ID: "Qwen/Qwen3-8B", MaxModelLen: 40960, OwnedBy: "vllm"}},
		{"models_sglang.json", Model{ID: "Qwen/Qwen3-8B", MaxModelLen: 40960, OwnedBy: "sglang"}},
		{"models_llamacpp.json", Model{ID: "Qwen3-8B-Q4_K_M.gguf", MaxModelLen: 8192, OwnedBy: "llamacpp"}},
		{"models_llamacpp_old.json", Model{ID: "models/qwen2.5-7b-instruct-q4_k_m.gguf", OwnedBy: "llamacpp"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s := newServer(t, replay(t, tc.file))
			got, err := ResolveModels(context.Background(), []*Client{s.client(Options{})}, []string{s.URL + "/v1"}, "", &strings.Builder{})
			if err != nil || got != tc.want {
				t.Fatalf("ResolveModels = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	// A meta that is no object fails nothing and gives no context.
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"data":[{"id":"m","owned_by":"llamacpp","meta":"n/a"}]}`)
	})
	got, err := ResolveModels(context.Background(), []*Client{s.client(Options{})}, []string{s.URL + "/v1"}, "m", &strings.Builder{})
	if err != nil || got != (Model{ID: "m", OwnedBy: "llamacpp"}) {
		t.Fatalf("ResolveModels = %+v, %v", got, err)
	}
}
