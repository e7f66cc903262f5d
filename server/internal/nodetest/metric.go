package nodetest

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Metric reads one sample from the /metrics of the node at addr (plain
// HTTP): name is the metric's name with its labels as Prometheus's text
// format prints them (`ticketd_waiters`, `ticketd_rpc_requests_total{code="ok",...}`).
// The sample missing fails the test.
func Metric(t testing.TB, addr, name string) float64 {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}
