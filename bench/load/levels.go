package load

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseLevels parses a comma-separated list of concurrency levels such as
// "1,16,64,256" (spaces around items allowed, empty items skipped): the form
// of the -concurrency flags of ticketbench and bench/etcdpeer, which
// FormatLevels writes. Errors: ErrInvalidConfig, wrapped, for an item that
// is not an integer ≥ 1 or for a list without items.
func ParseLevels(s string) ([]int, error) {
	var levels []int
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		n, err := strconv.Atoi(item)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: concurrency level %q is not an integer ≥ 1", ErrInvalidConfig, item)
		}
		levels = append(levels, n)
	}
	if len(levels) == 0 {
		return nil, fmt.Errorf("%w: no concurrency levels in %q", ErrInvalidConfig, s)
	}
	return levels, nil
}

// FormatLevels writes levels in the form ParseLevels reads: "1,16,64".
func FormatLevels(levels []int) string {
	items := make([]string, len(levels))
	for i, n := range levels {
		items[i] = strconv.Itoa(n)
	}
	return strings.Join(items, ",")
}
