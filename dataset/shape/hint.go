package shape

import "strings"

// answerSize is the size (bytes of content) of a row's own assistant
// answer that a job regenerates: the first assistant turn (whole false),
// or the sum of every assistant turn (whole true). 0 when the row has
// none. It reads leniently: turns already said what makes a row bad, and
// a hint is only an order (the producer starts long answers first).
func answerSize(r row, list, roleKey, contentKey string, whole bool) int {
	items, _ := r[list].([]any)
	size := 0
	for _, it := range items {
		turn, ok := it.(map[string]any)
		if !ok {
			continue
		}
		rk, ck := roleKey, contentKey
		if _, has := turn[rk]; !has {
			if _, alt := turn[altRoleKey(rk)]; alt {
				rk, ck = altRoleKey(rk), altContentKey(ck)
			}
		}
		name, _ := turn[rk].(string)
		if roles[strings.ToLower(name)] != "assistant" {
			continue
		}
		content, _ := contentOf(turn[ck], "", ck == "content")
		size += len(content)
		if !whole {
			break
		}
	}
	return size
}

// WholeHint is Row.Hint for a job that regenerates whole conversations:
// the bytes of content of all the row's assistant turns (0 for the shapes
// that hold a single prompt).
func (c *Converter) WholeHint(r row) int {
	switch c.shape(r) {
	case FormatShareGPT:
		return answerSize(r, "conversations", "from", "value", true)
	case FormatMessages:
		return answerSize(r, "messages", "role", "content", true)
	}
	return 0
}
