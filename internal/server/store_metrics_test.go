package server

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/memstore"
)

// TestStoreMetrics: a store reports its own metrics through
// Store.Metrics, whatever its type: the memory store its key count, and
// any other store the collector it brings.
func TestStoreMetrics(t *testing.T) {
	const yaml = "listeners: [{addr: '127.0.0.1:0'}]\nzones: [{name: a, limits: 5r/s}]\n"
	ts := start(t, parseConfig(t, yaml), Options{})
	post(t, ts.api+"/v1/check", `{"zone":"a","key":"k"}`)
	if v := metricValue(t, ts.api, "sluice_memstore_keys"); v != 1 {
		t.Errorf("memory store: sluice_memstore_keys %v, want 1", v)
	}

	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	own := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_test_store_connections", Help: "A store's own gauge."})
	own.Set(3)
	ts = start(t, parseConfig(t, yaml), Options{Store: &Store{Limiter: ms, Metrics: own}})
	if v := metricValue(t, ts.api, "sluice_test_store_connections"); v != 3 {
		t.Errorf("a store's own collector: %v, want 3", v)
	}
	if _, raw := get(t, ts.api+"/metrics", nil); strings.Contains(string(raw), "sluice_memstore_keys") {
		t.Error("a store without the memory store's collector reports sluice_memstore_keys")
	}
}
