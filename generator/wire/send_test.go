package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

const plainAnswer = `{"id":"c","object":"chat.completion","created":1,"model":"m",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"four"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`

// A redirect is followed as the http.Client follows it (307 and 308 keep
// the method and the body), so the answer comes from where the server sent
// it.
func TestRedirectFollowed(t *testing.T) {
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			var bodies atomic.Value
			mux := http.NewServeMux()
			mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				http.Redirect(w, r, "/v2/chat/completions", code)
			})
			mux.HandleFunc("/v2/chat/completions", func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				bodies.Store(string(b))
				_, _ = io.WriteString(w, plainAnswer)
			})
			s := httptest.NewServer(mux)
			defer s.Close()
			c := New(Options{BaseURL: s.URL + "/v1"})
			resp, err := c.Complete(context.Background(), userReq(false), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != "four" {
				t.Errorf("content %q, want the redirect target's answer", resp.Content)
			}
			want, _ := EncodeRequest(userReq(false))
			if got, _ := bodies.Load().(string); got != string(want) {
				t.Errorf("the redirect target got body %q, want %q", got, want)
			}
		})
	}
}

// A transport error reads as the http.Client's: `Post "URL": cause`, a
// *url.Error, classified as a connection failure.
func TestTransportErrorAsClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: the dial is refused
	base := "http://" + addr + "/v1"
	_, err = New(Options{BaseURL: base}).Complete(context.Background(), userReq(false), nil)
	e := asError(t, err, CauseConnection, true)
	var ue *url.Error
	if !errors.As(err, &ue) || ue.Op != "Post" || ue.URL != base+"/chat/completions" {
		t.Fatalf("error %v (%T) is not the Client's *url.Error for Post %s/chat/completions", err, e.Err, base)
	}
	if want := `Post "` + base + `/chat/completions": `; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
}

// A plain answer's body buffer is reused by the next request: the answer
// handed back must not share its bytes.
func TestPlainAnswerOutlivesItsBuffer(t *testing.T) {
	var n atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		word := strings.Repeat(fmt.Sprint(n.Add(1)%10), 100)
		_, _ = io.WriteString(w, strings.Replace(plainAnswer, `"four"`, `"`+word+`"`, 1))
	}))
	defer s.Close()
	c := New(Options{BaseURL: s.URL + "/v1"})
	var answers []Response
	for range 20 {
		resp, err := c.Complete(context.Background(), userReq(false), nil)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, resp)
	}
	for i, a := range answers {
		if want := strings.Repeat(fmt.Sprint((i+1)%10), 100); a.Content != want || a.Model != "m" {
			t.Fatalf("answer %d: content %q model %q, want %q and m: overwritten by a later answer", i, a.Content, a.Model, want)
		}
	}
}
