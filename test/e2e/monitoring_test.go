package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// promURL is the Prometheus that prometheus-operator runs for the chart's monitors
// (hack/demo.sh prom): host network, listening on 127.0.0.1 only.
const promURL = "http://127.0.0.1:9090"

// promAPI GETs a Prometheus API path and decodes its "data" into out; an API error (a query
// that does not parse or evaluate) is returned with Prometheus' own message.
func promAPI(path string, query url.Values, out any) error {
	resp, err := http.Get(promURL + path + "?" + query.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: %v: %s", path, err, body)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", path, r.Error)
	}
	return json.Unmarshal(r.Data, out)
}

// checkPrometheusOperator checks, in the API of the Prometheus that prometheus-operator runs
// from the chart's monitoring objects, after a healthy batch: the operator's and the node
// agent's targets up through the chart's HTTPS and token settings; every rule of the chart's
// PrometheusRule loaded and evaluating without error, and every recording rule with series
// during the run; every panel query of the chart's Grafana dashboard (and its node variable)
// evaluating. sealerUp says whether the batch's sealer pod was seen up (its PodMonitor).
func checkPrometheusOperator(t *testing.T, batch string, sealerUp bool) {
	var targets struct {
		ActiveTargets []struct {
			Labels    map[string]string `json:"labels"`
			ScrapeURL string            `json:"scrapeUrl"`
			Health    string            `json:"health"`
			LastError string            `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := promAPI("/api/v1/targets", url.Values{"state": {"active"}}, &targets); err != nil {
		t.Fatal(err)
	}
	up := map[string]bool{}
	for _, tg := range targets.ActiveTargets {
		job := tg.Labels["job"]
		if (job == "sealfleet-operator" || job == "sealfleet-node-agent") && !strings.HasPrefix(tg.ScrapeURL, "https://") {
			t.Errorf("target %s of %s is scraped without TLS (the chart sets metricsSecure)", tg.ScrapeURL, job)
		}
		if tg.Health == "up" {
			up[job] = true
		} else if strings.HasPrefix(job, "sealfleet-") {
			t.Logf("target %s of %s: %s %s", tg.ScrapeURL, job, tg.Health, tg.LastError)
		}
	}
	for _, job := range []string{"sealfleet-operator", "sealfleet-node-agent"} {
		if !up[job] {
			t.Errorf("no target of job %s up in prometheus-operator's Prometheus", job)
		}
	}
	if !sealerUp {
		t.Errorf("batch %s's sealer pod was never an up target of job sealfleet-sealer (the chart's sealer PodMonitor)", batch)
	}

	// The PrometheusRule: loaded (through prometheus-operator's rule ConfigMap and the config
	// reloader), every rule healthy.
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			File  string `json:"file"`
			Rules []struct {
				Name      string `json:"name"`
				Type      string `json:"type"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := promAPI("/api/v1/rules", nil, &rules); err != nil {
		t.Fatal(err)
	}
	records := map[string]bool{}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Health != "ok" || r.LastError != "" {
				t.Errorf("rule %s (group %s): health %q %s", r.Name, g.Name, r.Health, r.LastError)
			}
			if r.Type == "recording" {
				records[r.Name] = true
			} else {
				alerts++
			}
		}
	}
	for _, name := range chartRecordingRules(t) {
		if !records[name] {
			t.Errorf("recording rule %s of the chart's rules is not loaded in Prometheus", name)
		}
	}
	for name := range records {
		if ls, _, err := promQuery(fmt.Sprintf("last_over_time(%s[30m])", name)); err != nil {
			t.Errorf("recording rule %s: %v", name, err)
		} else if len(ls) == 0 {
			t.Errorf("recording rule %s has no series after a healthy batch", name)
		}
	}
	if alerts == 0 {
		t.Errorf("no alerting rule loaded from the chart's PrometheusRule")
	}

	// The dashboard's queries, with its node variable at "All" (its allValue).
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	raw, err := os.ReadFile(filepath.Join(repo, "charts", "sealfleet", "files", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	queries := 0
	variable := regexp.MustCompile(`\$\{?node\}?`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			q := variable.ReplaceAllString(tg.Expr, ".*")
			var res json.RawMessage
			if err := promAPI("/api/v1/query", url.Values{"query": {q}}, &res); err != nil {
				t.Errorf("dashboard panel %q: %s: %v", p.Title, q, err)
			}
			queries++
		}
	}
	var nodes []string
	if err := promAPI("/api/v1/label/node/values", url.Values{"match[]": {"sealfleet_node_slots"}}, &nodes); err != nil || !slices.Contains(nodes, "127.0.0.1") {
		t.Errorf("the dashboard's node variable (label_values(sealfleet_node_slots, node)) lacks 127.0.0.1: %d values, %v", len(nodes), err)
	}
	t.Logf("prometheus-operator's Prometheus: targets up %v; %d recording and %d alerting rules healthy; %d dashboard queries evaluate; node variable: %d nodes",
		up, len(records), alerts, queries, len(nodes))
}

// chartRecordingRules: the names of the recording rules in the chart's rule file.
func chartRecordingRules(t *testing.T) []string {
	raw, err := os.ReadFile(filepath.Join(repo, "charts", "sealfleet", "files", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s*- record:\s*(\S+)`).FindAllStringSubmatch(string(raw), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatal("no recording rule found in charts/sealfleet/files/rules.yaml")
	}
	return names
}

// waitAlertClears waits until query (an ALERTS selector) has no series: the alert resolved.
func waitAlertClears(t *testing.T, query string, limit time.Duration) time.Duration {
	t0 := time.Now()
	for time.Since(t0) < limit {
		if ls, _, err := promQuery(query); err == nil && len(ls) == 0 {
			return time.Since(t0)
		}
		time.Sleep(2 * time.Second)
	}
	t.Errorf("%s still firing %s after the batch ended", query, limit)
	return limit
}
