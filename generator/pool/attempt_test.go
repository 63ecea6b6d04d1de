package pool

import "testing"

// TestDecide is the retry rules as a table: what one attempt said and the
// budget before it, the step taken and the budget after.
func TestDecide(t *testing.T) {
	away := func(back, stop bool) func() (bool, bool) {
		return func() (bool, bool) { return back, stop }
	}
	never := func() (bool, bool) { panic("away asked") }
	other := func(ok bool) func() bool { return func() bool { return ok } }
	nowhere := func() bool { panic("elsewhere asked") }
	failed := outcome{retryable: true, away: never, elsewhere: nowhere}
	with := func(o outcome, f func(*outcome)) outcome { f(&o); return o }

	tests := []struct {
		name   string
		o      outcome
		before budget // max 3, 2 replicas, 1 schema retry unless set
		want   step
		after  budget // the counters only
	}{
		{"answered", outcome{answered: true}, budget{attempt: 1}, stepAnswered, budget{attempt: 1}},
		{"cut, more room", outcome{answered: true, moreRoom: true}, budget{attempt: 1}, stepAgain, budget{attempt: 1}},
		{"misshapen, asked again", outcome{answered: true, misshapen: true}, budget{attempt: 1}, stepElsewhere, budget{attempt: 1, misshapen: 1}},
		{"misshapen past schema retries", outcome{answered: true, misshapen: true}, budget{attempt: 2, misshapen: 1}, stepMisshapen, budget{attempt: 2, misshapen: 2}},
		{"stopping", with(failed, func(o *outcome) { o.stopping = true; o.paced = true }), budget{attempt: 1}, stepStop, budget{attempt: 1}},
		{"paced, one server: the record's attempt", with(failed, func(o *outcome) { o.paced = true }), budget{attempt: 1}, stepPaced, budget{attempt: 1}},
		{"paced, several: not the record's", with(failed, func(o *outcome) { o.paced = true; o.several = true }), budget{attempt: 1}, stepPaced, budget{}},
		{"paced with attempts spent", with(failed, func(o *outcome) { o.paced = true }), budget{attempt: 3, charged: 3}, stepPaced, budget{attempt: 3, charged: 3}},
		{"server away, back: excused", with(failed, func(o *outcome) { o.excusable = true; o.away = away(true, false) }), budget{attempt: 2, charged: 1}, stepElsewhere, budget{attempt: 2, charged: 1, excused: 1}},
		{"server away, several: off the record", with(failed, func(o *outcome) { o.excusable = true; o.several = true; o.away = away(true, false) }), budget{attempt: 2}, stepElsewhere, budget{attempt: 1, excused: 1}},
		{"run stops while the server is away", with(failed, func(o *outcome) { o.excusable = true; o.away = away(false, true) }), budget{attempt: 1}, stepStop, budget{attempt: 1}},
		{"server not away: charged", with(failed, func(o *outcome) { o.excusable = true; o.away = away(false, false) }), budget{attempt: 1}, stepBackOff, budget{attempt: 1, charged: 1}},
		{"excuses used up: charged", with(failed, func(o *outcome) { o.excusable = true }), budget{attempt: 1, excused: 3}, stepBackOff, budget{attempt: 1, charged: 1, excused: 3}},
		{"replica fault, another well: moved", with(failed, func(o *outcome) { o.fault = true; o.several = true; o.elsewhere = other(true) }), budget{attempt: 1}, stepElsewhere, budget{moved: 1}},
		{"replica fault, none other well: charged", with(failed, func(o *outcome) { o.fault = true; o.several = true; o.elsewhere = other(false) }), budget{attempt: 1}, stepBackOff, budget{attempt: 1, charged: 1}},
		{"replica fault, one server: charged", with(failed, func(o *outcome) { o.fault = true }), budget{attempt: 1}, stepBackOff, budget{attempt: 1, charged: 1}},
		{"moves used up: charged", with(failed, func(o *outcome) { o.fault = true; o.several = true }), budget{attempt: 1, moved: 6}, stepBackOff, budget{attempt: 1, charged: 1, moved: 6}},
		{"last attempt", failed, budget{attempt: 3, charged: 2}, stepFail, budget{attempt: 3, charged: 3}},
		{"not retryable", with(failed, func(o *outcome) { o.retryable = false }), budget{attempt: 1}, stepFail, budget{attempt: 1, charged: 1}},
		{"cut held, too long now", with(failed, func(o *outcome) { o.haveCut = true; o.tooLong = true }), budget{attempt: 2}, stepKeepCut, budget{attempt: 2, charged: 1}},
		{"cut held, retryable with attempts left", with(failed, func(o *outcome) { o.haveCut = true }), budget{attempt: 2}, stepBackOff, budget{attempt: 2, charged: 1}},
		{"cut held, attempts spent", with(failed, func(o *outcome) { o.haveCut = true }), budget{attempt: 3, charged: 2}, stepKeepCut, budget{attempt: 3, charged: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.before
			b.max, b.replicas, b.schema = 3, 2, 1
			got := decide(tt.o, &b)
			if got != tt.want {
				t.Errorf("step %v, want %v", got, tt.want)
			}
			want := tt.after
			want.max, want.replicas, want.schema = 3, 2, 1
			if b != want {
				t.Errorf("budget %+v, want %+v", b, want)
			}
		})
	}
}

// TestBudgetAttemptsAcrossARequest follows one request through a mix of
// attempts: the record's attempts are only those that were the prompt's.
func TestBudgetAttemptsAcrossARequest(t *testing.T) {
	b := newBudget(2, 3, 0)
	b.send()
	b.move() // a replica failed it: another took it
	b.send()
	b.pace(true) // a 429 with replicas at hand
	b.send()
	b.charge() // a 500 on every replica
	if b.spent() {
		t.Fatal("spent after one charged attempt of 2")
	}
	b.send()
	b.charge()
	if !b.spent() || b.attempt != 2 || b.moved != 1 {
		t.Fatalf("budget %+v: want spent, 2 attempts, 1 moved", b)
	}
	if !b.mayMove() || b.misshape() {
		t.Fatalf("budget %+v: moves are 2 per replica, schema retries 0", b)
	}
}
