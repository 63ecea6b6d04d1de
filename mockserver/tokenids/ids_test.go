package tokenids

import (
	"slices"
	"testing"
)

func TestPrompt(t *testing.T) {
	if got := Prompt("", " \n"); !slices.Equal(got, []int32{emptyPromptID}) {
		t.Errorf("no words: %v", got)
	}
	a, b := Prompt("two words"), Prompt("two", "words")
	if len(a) != 2 || !slices.Equal(a, b) || a[0] == a[1] {
		t.Errorf("ids %v and %v: want one a word, by the word", a, b)
	}
}
