package autoconc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/internal/promscrape"
)

// target is a run's limit, as the Runner keeps it.
type target struct{ limit int }

func (t *target) Limit() int { return t.limit }
func (t *target) SetLimit(limit int, _ string, _ time.Time) int {
	t.limit = limit
	return limit
}

// TestLoopFeedsEachEndpointItsOwnInFlight: with two endpoints at limit 16,
// one with 16 in flight and the other with 2, the second's controller is
// told its own 2 ("limit not reached") and holds, while the first grows;
// the run's limit is their sum. Fed the run's 18, the second would grow
// too, and the router would send it work it cannot be shown to take.
func TestLoopFeedsEachEndpointItsOwnInFlight(t *testing.T) {
	servers := []*simServer{
		{kvFits: 1000, preemptAbove: 2000, batchScale: 400, clock: time.Unix(0, 0)},
		{kvFits: 1000, preemptAbove: 2000, batchScale: 400, clock: time.Unix(0, 0)},
	}
	tg := &target{limit: 16}
	var eps []Endpoint
	var ctrls []*Controller
	for i, s := range servers {
		eps = append(eps, Endpoint{URL: "http://replica-" + string(rune('a'+i)), Scrape: func(context.Context) (promscrape.Sample, error) {
			limit := 16
			if len(ctrls) > i {
				limit = ctrls[i].Limit()
			}
			smp := s.sample(limit)
			smp.Found = map[string]bool{promscrape.MetricGenerationTokens: true, promscrape.MetricWaiting: true}
			return smp, nil
		}})
	}
	var log strings.Builder
	l, err := Prepare(context.Background(), eps, LoopOptions{
		Ceiling: 512, Target: tg,
		InFlight: func() (int, []int) {
			first := 16
			if len(ctrls) > 0 {
				first = ctrls[0].Limit()
			}
			return first + 2, []int{first, 2}
		},
		Log: &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range l.endpoints {
		ctrls = append(ctrls, ep.ctrl)
	}
	for range 10 {
		l.Step(context.Background())
	}
	if got := ctrls[1].Limit(); got != 16 {
		t.Errorf("the endpoint with 2 of 16 in flight moved to %d; it must hold (limit not reached)\n%s", got, log.String())
	}
	if got := ctrls[0].Limit(); got <= 16 {
		t.Errorf("the endpoint with its limit in flight stayed at %d; a server far from its knee must let it grow\n%s", got, log.String())
	}
	if want := ctrls[0].Limit() + ctrls[1].Limit(); tg.limit != want {
		t.Errorf("the run's limit is %d, want the endpoints' sum %d", tg.limit, want)
	}
}

// TestPrepareRefusesAServerWithoutVLLMMetrics: a server that answers with
// no generation-token counter cannot steer the limit: the run is refused
// before its first request, with what to do instead.
func TestPrepareRefusesAServerWithoutVLLMMetrics(t *testing.T) {
	eps := []Endpoint{{URL: "http://llama:8080/metrics", Scrape: func(context.Context) (promscrape.Sample, error) {
		return promscrape.Sample{At: time.Unix(1, 0), Found: map[string]bool{}}, nil
	}}}
	_, err := Prepare(context.Background(), eps, LoopOptions{Ceiling: 64, Target: &target{limit: 16}, InFlight: func() (int, []int) { return 0, nil }})
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "http://llama:8080/metrics") || refused.Hint == "" {
		t.Fatalf("error %v: want a RefusedError naming the URL, with a hint", err)
	}
}
