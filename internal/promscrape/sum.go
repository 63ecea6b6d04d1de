package promscrape

// Sum is the server's view of several replicas: token rates, running,
// waiting and preemptions add up; the KV cache usage is the mean of those
// that report it (each replica has its own cache, so with equal GPUs it is
// the share of all the caches in use); the speculative decoding figures are
// the mean weighted by each one's generation rate; the prefix-cache hit
// rate is that of every token looked up. The window is the
// longest; Servers counts the replicas summed; Kind is theirs when they
// are all of one kind, else KindUnknown.
func Sum(each []Rates) Rates {
	if len(each) == 1 {
		return each[0]
	}
	var out Rates
	out.Servers = len(each)
	if len(each) > 0 {
		out.Kind = each[0].Kind
	}
	var kvN int
	var specW, specRate, specLen float64
	var specN int
	var rateN int // replicas with a hit rate but no counts (SGLang)
	var rateSum float64
	for _, r := range each {
		if r.Kind != out.Kind {
			out.Kind = KindUnknown
		}
		out.GenTokPerSec += r.GenTokPerSec
		out.PromptTokPerSec += r.PromptTokPerSec
		out.Running += r.Running
		out.Waiting += r.Waiting
		out.Preemptions += r.Preemptions
		out.HasPreemptions = out.HasPreemptions || r.HasPreemptions
		out.Window = max(out.Window, r.Window)
		if r.HasKV {
			out.HasKV = true
			out.KVCacheUsage += r.KVCacheUsage
			kvN++
		}
		switch {
		case r.HasPrefix && r.PrefixQueried > 0:
			out.PrefixQueried += r.PrefixQueried
			out.PrefixHit += r.PrefixHit
		case r.HasPrefix:
			rateN++
			rateSum += r.PrefixHitRate
		}
		if r.HasSpec {
			specN++
			specW += r.GenTokPerSec
			specRate += r.AcceptanceRate * r.GenTokPerSec
			specLen += r.MeanAcceptanceLength * r.GenTokPerSec
		}
	}
	if kvN > 0 {
		out.KVCacheUsage /= float64(kvN)
	}
	// The hit rate of all the tokens looked up; replicas that report only
	// a rate are its mean when none reports counts.
	switch {
	case out.PrefixQueried > 0:
		out.HasPrefix, out.PrefixHitRate = true, out.PrefixHit/out.PrefixQueried
	case rateN > 0:
		out.HasPrefix, out.PrefixHitRate = true, rateSum/float64(rateN)
	}
	if specN > 0 {
		out.HasSpec = true
		if specW > 0 {
			out.AcceptanceRate, out.MeanAcceptanceLength = specRate/specW, specLen/specW
		} else {
			for _, r := range each {
				if r.HasSpec {
					out.AcceptanceRate += r.AcceptanceRate / float64(specN)
					out.MeanAcceptanceLength += r.MeanAcceptanceLength / float64(specN)
				}
			}
		}
	}
	return out
}
