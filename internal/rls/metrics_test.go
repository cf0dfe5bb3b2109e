package rls_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/keyname"
	"github.com/sluicehq/sluice/internal/rls"
)

// TestDetailedMetricFloodIsBounded floods a detailed_metric rule and a
// value_to_metric wildcard with distinct values, as a client that controls
// the header Envoy maps to the descriptor can: /metrics must stop growing at
// rls.MaxMetricValues labels, count the rest, and never show a raw value.
func TestDetailedMetricFloodIsBounded(t *testing.T) {
	r := start(t, map[string]string{"flood.yaml": `
domain: flood
descriptors:
  - key: api_key
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: path
    value: /v1/*
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
`}, rigOptions{})
	secret := func(i int) string { return fmt.Sprintf("sk_live_%08d", i) }
	send := func(from, to int) {
		for i := from; i < to; i++ {
			r.ask("flood", desc("api_key", secret(i)))
			r.ask("flood", desc("path", "/v1/"+secret(i)))
		}
	}
	// The first label is the digest of the value, as in logs.
	send(0, 1)
	r.wantMetric(`sluice_rls_descriptors_total{domain="flood",result="ok",rule="api_key_` + keyname.Of(secret(0)) + `"} 1`)
	r.wantMetric(`sluice_rls_descriptors_total{domain="flood",result="ok",rule="path_` + keyname.Of("/v1/"+secret(0)) + `"} 1`)

	half := rls.MaxMetricValues / 2
	send(1, half+100) // past the cap: 2 labels per value
	before := len(r.metrics())
	send(half+100, half+1100) // 2,000 more distinct values
	page := r.metrics()
	if grew := len(page) - before; grew > 1024 {
		t.Errorf("/metrics grew by %d bytes over 2,000 more distinct values, want < 1 KiB (bounded labels)", grew)
	}
	if strings.Contains(page, "sk_live_") {
		t.Error("/metrics shows a raw descriptor value")
	}
	if n := strings.Count(page, `rule="api_key_sha256:`) + strings.Count(page, `rule="path_sha256:`); n != rls.MaxMetricValues {
		t.Errorf("%d labels with a value digest, want the cap, %d", n, rls.MaxMetricValues)
	}
	// Past the cap, a descriptor is counted on its rule's own path.
	r.wantMetric(`sluice_rls_descriptors_total{domain="flood",result="ok",rule="api_key"} `)
	r.wantMetric(`sluice_rls_descriptors_total{domain="flood",result="ok",rule="path_/v1/*"} `)
	overflow := 2*(half+1100) - rls.MaxMetricValues
	r.wantMetric(fmt.Sprintf(`sluice_rls_metric_values_overflow_total{domain="flood"} %d`, overflow))
}
