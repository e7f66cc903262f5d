package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	koanfyaml "github.com/knadh/koanf/parsers/yaml"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// dashboard is the subset of Grafana's dashboard JSON model that
// docs/grafana/ticketd.json may use; decoding it with unknown fields
// disallowed is the schema check (a typo'd key fails the test).
type dashboard struct {
	UID           string   `json:"uid"`
	Title         string   `json:"title"`
	Description   string   `json:"description"`
	Tags          []string `json:"tags"`
	Timezone      string   `json:"timezone"`
	SchemaVersion int      `json:"schemaVersion"`
	Version       int      `json:"version"`
	Editable      bool     `json:"editable"`
	Refresh       string   `json:"refresh"`
	Time          struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"time"`
	Templating struct {
		List []struct {
			Name       string      `json:"name"`
			Type       string      `json:"type"`
			Label      string      `json:"label"`
			Query      string      `json:"query"`
			Datasource *datasource `json:"datasource"`
			IncludeAll bool        `json:"includeAll"`
			Multi      bool        `json:"multi"`
			Refresh    int         `json:"refresh"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int        `json:"id"`
	Type        string     `json:"type"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	Datasource  datasource `json:"datasource"`
	GridPos     struct {
		H int `json:"h"`
		W int `json:"w"`
		X int `json:"x"`
		Y int `json:"y"`
	} `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
		Overrides []any `json:"overrides"`
	} `json:"fieldConfig"`
	Targets []struct {
		RefID        string     `json:"refId"`
		Expr         string     `json:"expr"`
		LegendFormat string     `json:"legendFormat"`
		Datasource   datasource `json:"datasource"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("../docs/grafana/ticketd.json")
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d dashboard
	require.NoError(t, dec.Decode(&d), "dashboard JSON does not match the schema")
	return d
}

// TestDashboardSchema checks docs/grafana/ticketd.json against Grafana's
// dashboard model: required fields, known panel types, unique panel ids
// and refIds, panels inside the 24-column grid without overlaps, and every
// target an expression on the dashboard's Prometheus data source.
func TestDashboardSchema(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	require.NotEmpty(t, d.UID)
	require.NotEmpty(t, d.Title)
	require.GreaterOrEqual(t, d.SchemaVersion, 36)
	require.NotEmpty(t, d.Panels)
	types := map[string]bool{"timeseries": true, "stat": true, "table": true, "gauge": true}
	ids := map[int]bool{}
	type cell struct{ x, y int }
	used := map[cell]int{}
	for _, p := range d.Panels {
		require.True(t, types[p.Type], "panel %q: type %q", p.Title, p.Type)
		require.NotEmpty(t, p.Title)
		require.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		g := p.GridPos
		require.True(t, g.W > 0 && g.H > 0 && g.X >= 0 && g.Y >= 0 && g.X+g.W <= 24, "panel %q: gridPos %+v", p.Title, g)
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := used[cell{x, y}]; ok {
					t.Fatalf("panels %d and %d overlap at %d,%d", other, p.ID, x, y)
				}
				used[cell{x, y}] = p.ID
			}
		}
		require.Equal(t, "prometheus", p.Datasource.Type, "panel %q", p.Title)
		require.NotEmpty(t, p.Targets, "panel %q", p.Title)
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "panel %q", p.Title)
			require.False(t, refs[tg.RefID], "panel %q: refId %q twice", p.Title, tg.RefID)
			refs[tg.RefID] = true
		}
	}
}

var metricName = regexp.MustCompile(`\bticketd_[a-z_]+\b`)

// usedMetrics returns every ticketd_* metric family named by the dashboard
// and the alerting rules (histogram series reduced to their family).
func usedMetrics(t *testing.T) []string {
	t.Helper()
	var exprs []string
	for _, p := range loadDashboard(t).Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	b, err := os.ReadFile("../docs/prometheus/alerts.yml")
	require.NoError(t, err)
	rules, err := koanfyaml.Parser().Unmarshal(b)
	require.NoError(t, err, "alerts.yml is not YAML")
	groups, _ := rules["groups"].([]any)
	require.NotEmpty(t, groups, "alerts.yml has no groups")
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			require.NotEmpty(t, rule["alert"])
			expr, _ := rule["expr"].(string)
			require.NotEmpty(t, expr, "rule %v", rule["alert"])
			exprs = append(exprs, expr)
		}
	}
	set := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricName.FindAllString(e, -1) {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				m = strings.TrimSuffix(m, suf)
			}
			set[m] = true
		}
	}
	var out []string
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// TestDashboardMetricsExist scrapes /metrics of the leader of a real
// three-node cluster (hashicorp backend, badger in temp dirs) and checks
// that every ticketd metric the dashboard and the alerting rules use exists
// there, the leader-only per-follower series included (they appear with
// the backend's first report, about a second after the election).
func TestDashboardMetricsExist(t *testing.T) {
	t.Parallel()
	used := usedMetrics(t)
	require.NotEmpty(t, used)
	for _, m := range []string{"ticketd_raft_follower_lag_entries", "ticketd_raft_follower_last_contact_seconds", "ticketd_peer_transport_errors_total"} {
		require.Contains(t, used, m, "the dashboard or the alerts should use %s", m)
	}
	c := nodetest.Start(t, 3)
	l := c.Leader(t)
	var missing []string
	require.Eventually(t, func() bool {
		have := exported(t, l.Addr)
		missing = missing[:0]
		for _, m := range used {
			if !have[m] {
				missing = append(missing, m)
			}
		}
		return len(missing) == 0
	}, 15*time.Second, 100*time.Millisecond, "used by the dashboard or alerts but not exported by the leader")
	require.Empty(t, missing, "used by the dashboard or alerts but not exported by the leader")
}

// exported returns the metric families a node's /metrics has samples of.
func exported(t *testing.T, addr string) map[string]bool {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	have := map[string]bool{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if f, ok := strings.CutPrefix(sc.Text(), "# TYPE "); ok {
			have[strings.Fields(f)[0]] = true
		}
	}
	require.NoError(t, sc.Err())
	return have
}
