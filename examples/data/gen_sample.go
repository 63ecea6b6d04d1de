//go:build ignore

// gen_sample writes sample.jsonl: 300 rows in the exact row shape of
// mlabonne/open-perfectblend ({"conversations":[{"from","value"}...],
// "source"}), with that dataset's mix of sources, some multi-turn rows, some
// with a system turn first and some non-ASCII text. The content is templated
// but varied, so prompt lengths and shapes look like the real thing. It is
// deterministic: rerunning it rewrites the same file.
//
//	go run examples/data/gen_sample.go > examples/data/sample.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
)

type turn struct {
	From  string `json:"from"`
	Value string `json:"value"`
}

type row struct {
	Conversations []turn `json:"conversations"`
	Source        string `json:"source"`
}

var rng = rand.New(rand.NewPCG(20240601, 7))

func pick[T any](xs []T) T { return xs[rng.IntN(len(xs))] }

var names = []string{"Maria", "Kenji", "Aisha", "Tom", "Léa", "Wei", "Olu", "Sofía", "Raj", "Ingrid"}
var items = []string{"apples", "pencils", "marbles", "stickers", "books", "cookies", "seashells", "coins"}

func metaMath(i int) (string, string) {
	a, b, c := 3+rng.IntN(40), 2+rng.IntN(15), 1+rng.IntN(9)
	switch i % 4 {
	case 0:
		n := pick(names)
		it := pick(items)
		return fmt.Sprintf("%s has %d %s, buys %d packs with %d %s each and then gives away %d. How many %s does %s have now?", n, a, it, b, c, it, c, it, n),
			fmt.Sprintf("%s starts with %d %s.\nThe packs add %d * %d = %d, for %d + %d = %d.\nAfter giving away %d, %s has %d - %d = %d.\nThe answer is: %d", n, a, it, b, c, b*c, a, b*c, a+b*c, c, n, a+b*c, c, a+b*c-c, a+b*c-c)
	case 1:
		return fmt.Sprintf("If $%dx + %d = %d$, what is the value of $x$?", b, c, b*a+c),
			fmt.Sprintf("Subtracting %d from both sides gives $%dx = %d$. Dividing by %d, $x = %d$.\nThe answer is: %d", c, b, b*a, b, a, a)
	case 2:
		return fmt.Sprintf("What is the remainder when $%d^{%d}$ is divided by %d?", b, c+1, c+2),
			fmt.Sprintf("We compute powers of %d modulo %d and look for a cycle. The remainder is %d.\nThe answer is: %d", b, c+2, pow(b, c+1, c+2), pow(b, c+1, c+2))
	default:
		return fmt.Sprintf("A rectangle has a perimeter of %d cm and its length is %d cm more than its width. What is its area?", 4*a+2*b, b),
			fmt.Sprintf("Let the width be $w$. Then $2(w + w + %d) = %d$, so $w = %d$ and the length is %d. The area is %d * %d = %d.\nThe answer is: %d", b, 4*a+2*b, a, a+b, a, a+b, a*(a+b), a*(a+b))
	}
}

func pow(b, e, m int) int {
	r := 1
	for range e {
		r = r * b % m
	}
	return r
}

var codeTasks = []string{
	"Create a Python function that checks whether a string is a palindrome, ignoring case and punctuation.",
	"Write a JavaScript function to debounce another function by %d milliseconds.",
	"Generate a SQL query that returns the top %d customers by total order value.",
	"Write a Go program that reads a file line by line and prints the %d longest lines.",
	"Implement binary search in Java and return -1 when the element is missing.",
	"Create a Rust function that merges two sorted vectors into one sorted vector.",
	"Write a bash one-liner that counts the files larger than %d MB in a directory tree.",
	"Design a Python class for a bank account with deposit, withdraw and a balance history of the last %d operations.",
}

func code(i int) (string, string) {
	t := codeTasks[i%len(codeTasks)]
	if strings.Contains(t, "%d") {
		t = fmt.Sprintf(t, 3+rng.IntN(500))
	}
	return t, "Here is one way to do it:\n\n```\n# implementation\n...\n```\n\nIt runs in linear time and handles the empty input."
}

var writingTopics = []string{
	"the history of the printing press", "why sleep matters for memory", "a lighthouse keeper who finds a message in a bottle",
	"the pros and cons of remote work", "how vaccines train the immune system", "a city where it never stops raining",
	"the ethics of self-driving cars", "learning a second language as an adult", "the first expedition to Antarctica",
}
var writingForms = []string{
	"Write a %d-word essay about %s.", "Write a short story about %s.", "Compose a poem about %s in the style of Emily Dickinson.",
	"Explain %s to a ten-year-old.", "Give me five bullet points summarizing %s.", "Draft a persuasive op-ed on %s.",
}

func writing() (string, string) {
	f := pick(writingForms)
	topic := pick(writingTopics)
	var q string
	if strings.HasPrefix(f, "Write a %d") {
		q = fmt.Sprintf(f, 100*(2+rng.IntN(8)), topic)
	} else {
		q = fmt.Sprintf(f, topic)
	}
	return q, "Certainly! " + strings.Repeat("Here is a thoughtful piece on "+topic+". ", 2+rng.IntN(4))
}

var unicodePrompts = []string{
	"请解释一下量子计算和经典计算的区别。",
	"日本の四季について短いエッセイを書いてください。",
	"한국어로 간단한 자기소개를 작성해 주세요.",
	"Explique-moi la différence entre « savoir » et « connaître » en français.",
	"¿Cómo se prepara una auténtica paella valenciana? 🥘",
	"Schreibe eine kurze Geschichte über einen Bäcker in München.",
	"Translate to English: «Жизнь прекрасна, когда рядом друзья.»",
	"Give me three fun facts about octopuses 🐙🌊",
	"Rédigez un courriel poli pour reporter une réunion à jeudi.",
	"用Python写一个函数，计算列表中所有偶数的和。",
}

var slimorcaSystems = []string{
	"You are an AI assistant. User will give you a task. Your goal is to complete the task as faithfully as you can. While performing the task think step-by-step and justify your steps.",
	"You are a helpful assistant, who always provide explanation. Think like you are answering to a five year old.",
	"You are an AI assistant that follows instruction extremely well. Help as much as you can.",
}

var followUps = []string{
	"Can you make it shorter?", "Now explain it step by step.", "What would change if the numbers were doubled?",
	"Can you add comments to the code?", "Give me an example.", "Translate your answer into French.",
}

func main() {
	w := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range 300 {
		var q, a, source, system string
		switch k := i % 10; {
		case k <= 2:
			q, a = metaMath(i)
			source = "MetaMath"
		case k == 3:
			q, a = code(i)
			source = "code_instructions_122k"
		case k == 4:
			q, a = writing()
			source = "WizardLM"
		case k == 5:
			q, a = writing()
			source = "Magpie-Align/Magpie-Pro-300K-Filtered"
		case k == 6:
			q, a = pick(unicodePrompts), "Bien sûr ! 当然可以。 Here is my answer ✅"
			source = "ultrafeedback"
		case k == 7:
			q, a = writing()
			source = "airoboros"
			system = "A chat."
		case k == 8:
			q, a = metaMath(i)
			source = "slimorca"
			system = pick(slimorcaSystems)
		default:
			q, a = code(i)
			source = "Magpie-Align/Magpie-Pro-MT-300K-v0.1"
		}
		var conv []turn
		if system != "" {
			conv = append(conv, turn{"system", system})
		}
		conv = append(conv, turn{"human", q}, turn{"gpt", a})
		if i%10 == 9 || i%23 == 0 {
			for range 1 + rng.IntN(2) {
				conv = append(conv, turn{"human", pick(followUps)}, turn{"gpt", "Of course. " + a})
			}
		}
		if err := enc.Encode(row{Conversations: conv, Source: source}); err != nil {
			fmt.Fprintln(os.Stderr, "Error:", err)
			os.Exit(1)
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
