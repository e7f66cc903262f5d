package sdk

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	const base, maxD = 10 * time.Millisecond, 80 * time.Millisecond
	tests := []struct {
		name string
		n    int
		want time.Duration // the upper end d; the delay lies in [d/2, d]
	}{
		{name: "first", n: 0, want: 10 * time.Millisecond},
		{name: "doubles", n: 2, want: 40 * time.Millisecond},
		{name: "capped", n: 5, want: maxD},
		{name: "no_overflow", n: 200, want: maxD},
		{name: "negative_exponent", n: -1, want: base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for range 200 {
				if d := backoff(base, maxD, tt.n); d < tt.want/2 || d > tt.want {
					t.Errorf("backoff(%d) = %v, want within [%v, %v]", tt.n, d, tt.want/2, tt.want)
					return
				}
			}
		})
	}
}
