package promscrape

// Health remembers whether a server's last scrape failed, so that a caller
// reports an outage once, when it begins, and the recovery once, when it
// ends, instead of a line at every scrape while a server restarts.
//
// The zero value is a server not known to fail. A Health is for one
// server, and is not safe for concurrent use: each scrape loop keeps its
// own.
type Health struct {
	failing bool
}

// Failed records a failed scrape. It reports whether this failure begins
// an outage, the one failure to report; later ones until a scrape answers
// are not news.
func (h *Health) Failed() bool {
	begins := !h.failing
	h.failing = true
	return begins
}

// Answered records a scrape that answered. It reports whether this ends
// an outage, a recovery to report.
func (h *Health) Answered() bool {
	ends := h.failing
	h.failing = false
	return ends
}
