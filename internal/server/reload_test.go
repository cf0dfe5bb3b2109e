package server

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/edge"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const reloadBase = "listeners: [{addr: \"127.0.0.1:0\"}]\nzones:\n"

func TestReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, reloadBase+"  - {name: z, limits: 1r/m}\n")
	cfg := loadConfig(t, path)
	ts := start(t, cfg, Options{ConfigPath: path, WatchInterval: -1})
	check := func(zone string) int {
		resp, _ := post(t, ts.api+"/v1/check", `{"zone":"`+zone+`","key":"a"}`)
		return resp.StatusCode
	}
	if got := check("z"); got != http.StatusOK {
		t.Fatalf("first check: %d", got)
	}
	if got := check("z"); got != http.StatusTooManyRequests {
		t.Fatalf("second check under 1r/m: %d, want 429", got)
	}

	// Raise the limit and add a zone: the usage so far is kept (same
	// algorithm and window), the new zone answers.
	writeFile(t, path, reloadBase+"  - {name: z, limits: 3r/m}\n  - {name: y, limits: 10r/m}\n")
	if err := ts.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := check("z"); got != http.StatusOK {
		t.Errorf("after raising to 3r/m: %d, want 200", got)
	}
	if got := check("y"); got != http.StatusOK {
		t.Errorf("new zone: %d, want 200", got)
	}

	// A bad file keeps the running configuration and says why.
	writeFile(t, path, reloadBase+"  - {name: z, limits: 0r/m}\n")
	err := ts.Reload()
	if err == nil || !strings.Contains(err.Error(), "sluice.yaml:3: zones[0].limits") {
		t.Fatalf("Reload of a bad file: %v, want the file, line and path", err)
	}
	if got := check("y"); got != http.StatusOK {
		t.Errorf("zone y after a failed reload: %d, want 200 (old configuration kept)", got)
	}
	if got := check("z"); got != http.StatusOK {
		t.Errorf("zone z after a failed reload: %d, want 200 (3r/m kept)", got)
	}
	if !strings.Contains(ts.logs.String(), "configuration reload failed") {
		t.Errorf("the failed reload was not logged:\n%s", ts.logs)
	}
	if got := metricValue(t, ts.api, `sluice_config_reloads_total{result="ok"}`); got != 1 {
		t.Errorf("ok reloads %v, want 1", got)
	}
	if got := metricValue(t, ts.api, `sluice_config_reloads_total{result="failed"}`); got != 1 {
		t.Errorf("failed reloads %v, want 1", got)
	}
}

func TestWatchReloadsOnChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, reloadBase+"  - {name: z, limits: 1r/m}\n")
	cfg := loadConfig(t, path)
	synctest.Test(t, func(t *testing.T) {
		s, err := New(t.Context(), cfg, Options{ConfigPath: path})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.watch(ctx, path, time.Second)

		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if s.Config() != cfg {
			t.Fatal("reloaded without a change")
		}
		writeFile(t, path, reloadBase+"  - {name: renamed, limits: 1r/m}\n")
		time.Sleep(time.Second)
		synctest.Wait()
		if s.Config().Zone("renamed") == nil {
			t.Fatalf("file change not picked up within one interval; zones %+v", s.Config().Zones)
		}
		writeFile(t, path, "not: [valid")
		time.Sleep(time.Second)
		synctest.Wait()
		if s.Config().Zone("renamed") == nil {
			t.Fatal("a bad file replaced the running configuration")
		}
	})
}

func TestShutdownDrainsInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	up := newUpstream(t)
	up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		w.Write([]byte("finished"))
	})
	ts := start(t, parseConfig(t, proxyConfig(up.URL, "always")), Options{})

	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := client.Get(ts.proxy + "/free")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		got <- result{resp.StatusCode, string(body), err}
	}()
	<-entered
	ts.cancel()

	// The listeners stop accepting while the request is in flight.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := (&http.Transport{DisableKeepAlives: true}).RoundTrip(mustRequest(t, ts.api+"/healthz"))
		if err != nil {
			break
		}
		c.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting 5 s after shutdown began")
		}
	}
	select {
	case <-ts.done:
		t.Fatal("Serve returned with a request in flight")
	default:
	}
	close(release)
	r := <-got
	if r.err != nil || r.status != http.StatusOK || r.body != "finished" {
		t.Errorf("in-flight request: %+v, want 200 finished", r)
	}
	if err := ts.stop(); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestReloadClosesUnusedAsync: a reload that changes an async zone's sync
// interval closes the limiter of the old interval (its flushers stop and
// what it owed is sent), rather than keeping it until shutdown.
func TestReloadClosesUnusedAsync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, reloadBase+"  - {name: z, limits: 10r/h, mode: async, sync_interval: 1m}\n")
	ts := start(t, loadConfig(t, path), Options{ConfigPath: path, WatchInterval: -1})
	for range 4 { // the third answer is the key's view, the fourth owed
		if resp, raw := post(t, ts.api+"/v1/check", `{"zone":"z","key":"a"}`); resp.StatusCode != http.StatusOK {
			t.Fatalf("check: %d %s", resp.StatusCode, raw)
		}
	}
	ts.backend.amu.Lock()
	var old []*edge.Async
	for _, a := range ts.backend.asyncs {
		old = append(old, a)
	}
	ts.backend.amu.Unlock()
	if len(old) != 1 || old[0].Stats().Pending != 1 {
		t.Fatalf("before the reload: %d async limiters, want 1 owing 1", len(old))
	}
	writeFile(t, path, reloadBase+"  - {name: z, limits: 10r/h, mode: async, sync_interval: 30s}\n")
	if err := ts.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	ts.backend.closing.Wait()
	ts.backend.amu.Lock()
	for k, a := range ts.backend.asyncs {
		if a == old[0] || k.interval != 30*time.Second {
			t.Errorf("after the reload: the limiter of %v is still kept, want only the new one of 30s", k.interval)
		}
	}
	ts.backend.amu.Unlock()
	if s := old[0].Stats(); s.Pending != 0 || s.Dropped != 0 {
		t.Errorf("the old limiter after the reload: %+v, want everything sent", s)
	}
	resp, raw := post(t, ts.api+"/v1/check", `{"zone":"z","key":"a"}`)
	if d := decodeDecision(t, raw); resp.StatusCode != http.StatusOK || len(d.Limits) != 1 || d.Limits[0].Remaining != 5 {
		t.Errorf("check after the reload: %d %s, want 5 remaining (the old limiter's 4 recorded)", resp.StatusCode, raw)
	}
}
