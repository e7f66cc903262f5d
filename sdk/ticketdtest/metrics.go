package ticketdtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors of package ticketdtest. Compare with errors.Is.
var (
	// ErrNoMetric: the node's /metrics page has no sample of the name asked
	// for (a labelled counter is absent until first incremented).
	ErrNoMetric = errors.New("ticketdtest: no such metric")
)

// Metric returns the value of the Prometheus sample name on node i's
// /metrics page, read with a one-second timeout. name is the sample as
// exposed: a bare gauge or counter ("ticketd_waiters"), or one with its
// labels in exposition order
// (`ticketd_rpc_requests_total{code="ok",procedure="/ticket.v1.LockService/Acquire"}`).
// Errors: the HTTP error, ErrNoMetric, or a parse error of the value. Safe
// for concurrent use.
func (c *Cluster) Metric(i int, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(i)+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("ticketdtest: metrics of node %d: %w", i, err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("ticketdtest: metric %s of node %d: %w", name, i, err)
			}
			return f, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("ticketdtest: metrics of node %d: %w", i, err)
	}
	return 0, fmt.Errorf("%w: %s on node %d", ErrNoMetric, name, i)
}
