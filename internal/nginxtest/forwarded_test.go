package nginxtest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestNginxForgedForwardedFor: through examples/nginx.conf, a client that
// sends its own X-Forwarded-For or X-Real-IP cannot choose its key: each
// forged value still counts against the client's real address.
func TestNginxForgedForwardedFor(t *testing.T) {
	up := &app{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	n := startNginx(t, startSluice(t), upstream.Listener.Addr().String(), nil)
	mallory := clientFrom("127.0.0.5")
	statuses := make([]int, 0, 5)
	for i, h := range []map[string]string{
		{"X-Forwarded-For": "6.6.6.1"},
		{"X-Real-IP": "6.6.6.2"},
		{"X-Forwarded-For": "6.6.6.3", "X-Real-IP": "6.6.6.3"},
		{"X-Forwarded-For": "6.6.6.4, 6.6.6.5"},
		{},
	} {
		req, err := http.NewRequest(http.MethodGet, n.URL+"/page", nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := mallory.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		if want := []int{200, 200, 200, 429, 429}[i]; resp.StatusCode != want {
			t.Errorf("request %d with %v: status %d, want %d (3r/h for 127.0.0.5 whatever it sends)", i+1, h, resp.StatusCode, want)
		}
	}
	t.Logf("statuses %v", statuses)
}
