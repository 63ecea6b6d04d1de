package pool

// A request's attempts as two small types: the budget they are held to
// (which attempts are the prompt's, which are excused because its server
// went away, which moved off a failing replica) and the decision taken
// after each one (answered, send again, elsewhere, back off, fail, stop).
// The decision is a pure function of what the attempt said and the budget,
// so the retry rules read as one table and are tested as one.

// budget counts one request's attempts. attempt is the record's count:
// every request sent, less those that were not the prompt's (moved off a
// replica, excused, paced with several replicas). charged are those held
// against retry.max_attempts: not the ones whose whole server was away
// (outage.go), nor, with several endpoints, those that failed on one
// replica while another could take the prompt at once (health.go). Those
// are bounded too (excused, moved), so a prompt that crashes every server
// it is sent to cannot keep the run busy forever.
type budget struct {
	max      int // retry.max_attempts
	replicas int // the endpoints a request may move between
	schema   int // answers not in the job's shape allowed before a failure

	attempt   int
	charged   int
	excused   int
	moved     int
	misshapen int
}

func newBudget(maxAttempts, replicas, schemaRetries int) budget {
	return budget{max: maxAttempts, replicas: replicas, schema: schemaRetries}
}

// send counts a request about to be sent.
func (b *budget) send() { b.attempt++ }

// charge holds the last attempt against the prompt.
func (b *budget) charge() { b.charged++ }

// spent reports whether the prompt's attempts are used up.
func (b *budget) spent() bool { return b.charged >= b.max }

// mayExcuse reports whether an attempt may still be excused by an outage.
func (b *budget) mayExcuse() bool { return b.excused < b.max }

// excuse takes the last attempt off the prompt: its server went away under
// it. With several replicas it goes to another and is not the record's
// attempt either; the stats count the retry, by cause.
func (b *budget) excuse(several bool) {
	b.excused++
	if several {
		b.attempt--
	}
}

// mayMove reports whether an attempt may still move off a failing replica:
// max_attempts per replica.
func (b *budget) mayMove() bool { return b.moved < b.max*b.replicas }

// move takes the last attempt off the prompt and the record: the replica
// failed it, and another takes it at once.
func (b *budget) move() {
	b.moved++
	b.attempt--
}

// pace takes a 429 that is the server's pacing: never the prompt's, and,
// with several replicas (another takes it at once), not the record's.
func (b *budget) pace(several bool) {
	if several {
		b.attempt--
	}
}

// misshape counts an answer not in the job's shape and reports whether it
// may be asked again.
func (b *budget) misshape() bool {
	b.misshapen++
	return b.misshapen <= b.schema
}

// step is what a request does after an attempt.
type step int

const (
	stepAnswered  step = iota // the answer is the key's
	stepAgain                 // cut at max_tokens: at once, with more room
	stepElsewhere             // at once, on another replica where there is one (misshapen, moved, excused)
	stepPaced                 // a 429: the endpoint held back, the prompt asked again uncharged
	stepBackOff               // a charged failure with attempts left: wait, then again
	stepKeepCut               // the longer answer cannot be had: the cut one is kept
	stepMisshapen             // answered out of shape too often: a failure of the prompt
	stepFail                  // failed for good
	stepStop                  // the run stops: nothing written, asked on resume
)

var stepNames = [...]string{"answered", "again", "elsewhere", "paced", "back off", "keep cut", "misshapen", "fail", "stop"}

func (s step) String() string { return stepNames[s] }

// outcome is what one attempt said, as the decision needs it. away and
// elsewhere are asked only where the rules reach them, because asking has
// effects: away closes the server's gate and waits until an endpoint is up
// (stop: the wait ended with the run), elsewhere marks the replica failed
// for this prompt and reports whether another well one can take it now.
type outcome struct {
	answered  bool // a reply in the model asked
	moreRoom  bool // answered, cut at max_tokens, and the job wants more
	misshapen bool // answered, not in the job's shape
	stopping  bool // the run's context ended, or the request was canceled
	paced     bool // a 429 that is pacing (package pace)
	several   bool // more than one endpoint
	excusable bool // a failure its server's absence could explain (router.excusable), with a gate to ask
	fault     bool // the replica's failure, retryable (replicaFault)
	retryable bool
	tooLong   bool // the server refused the request as too long for its context
	haveCut   bool // an earlier answer cut at max_tokens is held

	away      func() (back, stop bool)
	elsewhere func() bool
}

// decide is the step after an attempt, and counts it in b. Its order is the
// rules' priority: an answer first, a stopping run, the server's pacing,
// its absence, a failing replica with another at hand, and only then the
// prompt's own attempt.
func decide(o outcome, b *budget) step {
	if o.answered {
		switch {
		case o.moreRoom:
			return stepAgain
		case !o.misshapen:
			return stepAnswered
		case b.misshape():
			// No backoff: the server is well, the answer was not.
			return stepElsewhere
		default:
			return stepMisshapen
		}
	}
	if o.stopping {
		return stepStop
	}
	if o.paced {
		b.pace(o.several)
		return stepPaced
	}
	if o.excusable && b.mayExcuse() {
		back, stop := o.away()
		if stop {
			return stepStop
		}
		if back {
			b.excuse(o.several)
			return stepElsewhere
		}
	}
	if o.fault && o.several && b.mayMove() && o.elsewhere() {
		b.move()
		return stepElsewhere
	}
	b.charge()
	if o.haveCut && (o.tooLong || !o.retryable || b.spent()) {
		return stepKeepCut
	}
	if !o.retryable || b.spent() {
		return stepFail
	}
	return stepBackOff
}
