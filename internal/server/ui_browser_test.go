package server

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/keyname"
)

// chromium returns the path of Debian's chromium. Missing, the test fails
// in CI (CI=true) and is skipped elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (scripts/test installs it)")
	}
	t.Skip("chromium is not installed; scripts/test installs it")
	return ""
}

// browser starts a headless chromium, with a fresh profile, for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	// Start the browser on ctx itself: a browser started by a step's
	// shorter context would end with that step.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// within runs steps, failing the test if they take longer than d.
func within(t *testing.T, ctx context.Context, d time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestUIBrowser opens /ui in a real headless chromium against a real
// server with traffic: a wrong token is refused, the zones render, a key
// pushed over its limit appears in the denied list within a few seconds,
// and its reset button clears it (the key is allowed again). With
// SLUICE_SCREENSHOT=FILE it writes a PNG of the page there (docs/ui.png).
func TestUIBrowser(t *testing.T) {
	ctx := browser(t)
	ts := start(t, topServerConfig(t), Options{})
	admin := adminURL(t, ts)

	// Background traffic, bounded: a few keys in every zone, some near
	// or over their limits, until the test ends.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		bodies := []string{`{"zone":"login","key":"203.0.113.7"}`, `{"zone":"trial","key":"198.51.100.23"}`,
			`{"zone":"tokens","key":"tok_live_93b1"}`, `{"zone":"login","key":"192.0.2.10"}`, `{"zone":"tokens","key":"tok_live_5d2e"}`}
		for i := 0; i < 2000; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			resp, err := client.Post(ts.api+"/v1/check", "application/json", strings.NewReader(bodies[i%len(bodies)]))
			if err == nil {
				resp.Body.Close()
			}
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })

	within(t, ctx, 30*time.Second, "a wrong token is refused",
		chromedp.Navigate(admin+"/ui/"),
		chromedp.SendKeys("#token", "wrong-token"),
		chromedp.Click("#save"),
		chromedp.WaitVisible("#status.error"),
	)
	status, err := chromedp.Run(ctx, chromedp.Text("#status"))
	if err != nil || !strings.Contains(status, "refused") {
		t.Fatalf("status with a wrong token = %q, %v; want a refusal", status, err)
	}
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("article.zone").length`)); n != 0 {
		t.Errorf("%d zones drawn with a wrong token", n)
	}

	within(t, ctx, 10*time.Second, "the zones render with the right token",
		chromedp.SetValue("#token", topToken),
		chromedp.Click("#save"),
		chromedp.WaitVisible(`article.zone[data-zone="login"]`),
		chromedp.WaitVisible(`article.zone[data-zone="trial"]`),
		chromedp.WaitVisible(`article.zone[data-zone="tokens"]`),
		chromedp.WaitVisible(`article.zone svg.chart polyline`),
	)

	key := "mallory"
	for range 6 { // 3r/m: 3 allowed, 3 denied
		post(t, ts.api+"/v1/check", `{"zone":"login","key":"`+key+`"}`)
	}
	row := `article.zone[data-zone="login"] tr.denied[data-id="` + keyname.Of(key) + `"]`
	within(t, ctx, 5*time.Second, "the denied key appears", chromedp.WaitVisible(row))
	text, _ := chromedp.Run(ctx, chromedp.Text(row))
	if !strings.Contains(text, key) { // the zone shows its keys
		t.Errorf("denied row = %q, want the key %q", text, key)
	}
	if path := os.Getenv("SLUICE_SCREENSHOT"); path != "" {
		within(t, ctx, 5*time.Second, "the page shows the background traffic", chromedp.WaitVisible(`article.zone[data-zone="trial"] tr.denied`))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	within(t, ctx, 5*time.Second, "the reset button clears the key",
		chromedp.Click(row+` button.reset`),
		chromedp.WaitNotPresent(row),
	)
	if resp, _ := post(t, ts.api+"/v1/check", `{"zone":"login","key":"`+key+`"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("a check after the reset from the page: %d, want 200", resp.StatusCode)
	}
}
