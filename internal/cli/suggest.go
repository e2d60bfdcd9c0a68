package cli

import "strings"

// suggestion is the known word nearest to typed: the first one within two
// edits (fewer edits than typed has letters, so "-x" suggests nothing), else
// the first that typed begins. "" when none is near.
func suggestion(typed string, known []string) string {
	best, bestDistance := "", 3
	for _, k := range known {
		if d := editDistance(typed, k); d < bestDistance && d < len(typed) {
			best, bestDistance = k, d
		}
	}
	if best != "" || len(typed) < 2 {
		return best
	}
	for _, k := range known {
		if strings.HasPrefix(k, typed) {
			return k
		}
	}
	return ""
}

// editDistance is the Levenshtein distance: the fewest insertions,
// deletions and substitutions of a byte that turn a into b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
