package nginxtest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/nginxtest"
)

// nginx in front of a test upstream serves its responses.
func TestStartProxies(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream saw %s", r.URL.Path)
	}))
	defer up.Close()
	n := nginxtest.Start(t, func(listen string) string {
		return fmt.Sprintf(`server {
        listen %s;
        location / { proxy_pass %s; }
    }`, listen, up.URL)
	})
	res, err := http.Get(n.URL + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "upstream saw /hello" || !strings.HasPrefix(res.Header.Get("Server"), "nginx") {
		t.Fatalf("got %d %q (Server %q), want nginx passing the upstream's answer", res.StatusCode, body, res.Header.Get("Server"))
	}
}
