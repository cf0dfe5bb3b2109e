package server

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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

// waitSeconds polls GET /v1/top until zone login has n seconds of
// traffic in its history (at most 2 minutes).
func waitSeconds(t *testing.T, admin string, n int) {
	t.Helper()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	for {
		_, rep := getTop(t, admin+"/v1/top?zone=login", topToken)
		busy := 0
		for _, s := range rep.Zones[0].Seconds {
			if s.Allowed+s.Denied > 0 {
				busy++
			}
		}
		if busy >= n {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d seconds of traffic after 2 minutes, want %d", busy, n)
		}
	}
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

	// Background traffic, bounded: clients of every zone, each new one
	// allowed a few times then denied, a few steady offenders, until the
	// test ends (at most 2,000 ticks of 50 ms).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 2000; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var body string
			switch i % 4 {
			case 0, 1:
				body = `{"zone":"login","key":"198.51.100.` + strconv.Itoa(i/8%200) + `"}`
			case 2:
				body = `{"zone":"trial","key":"user-` + strconv.Itoa(i/12%100) + `"}`
			default:
				body = []string{`{"zone":"tokens","key":"tok_live_93b1"}`, `{"zone":"login","key":"203.0.113.7"}`, `{"zone":"tokens","key":"tok_` + strconv.Itoa(i) + `"}`}[i/4%3]
			}
			resp, err := client.Post(ts.api+"/v1/check", "application/json", strings.NewReader(body))
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

	screenshot := os.Getenv("SLUICE_SCREENSHOT")
	if screenshot != "" {
		waitSeconds(t, admin, 60) // a chart worth showing: a minute of traffic
	}
	key := "mallory"
	for range 6 { // 3r/m: 3 allowed, 3 denied
		post(t, ts.api+"/v1/check", `{"zone":"login","key":"`+key+`"}`)
	}
	row := `article.zone[data-zone="login"] tr.denied[data-id="` + ts.top.ID(key) + `"]`
	within(t, ctx, 5*time.Second, "the denied key appears", chromedp.WaitVisible(row))
	text, _ := chromedp.Run(ctx, chromedp.Text(row))
	if !strings.Contains(text, key) { // the zone shows its keys
		t.Errorf("denied row = %q, want the key %q", text, key)
	}
	if path := screenshot; path != "" {
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
