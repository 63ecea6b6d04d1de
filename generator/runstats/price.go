package runstats

// Price is what a hosted server bills for one model, in USD per million
// tokens (endpoint.price). A prompt's cached tokens (usage's
// prompt_tokens_details.cached_tokens) are part of its prompt tokens and
// billed at CachedInput instead of Input.
type Price struct {
	Input, Output, CachedInput float64
}

// Cost is what an answer of these usage figures cost at p, in USD. Counts
// the server did not send are 0, so an answer without usage costs nothing
// here: the figure is what usage accounts for.
func (p Price) Cost(prompt, cached, completion int) float64 {
	cached = min(max(cached, 0), prompt)
	return (float64(prompt-cached)*p.Input + float64(cached)*p.CachedInput + float64(completion)*p.Output) / 1e6
}
