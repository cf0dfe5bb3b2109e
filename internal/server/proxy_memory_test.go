package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// TestProxyLongKeyFloodMemory performs a proxy attack with
// examples/sluice.yaml's upload rule: POST /upload with a new 30 KB
// X-Upload-Pool header and a new 30 KB session cookie each time, every one
// allowed (two states per request). The heap the server keeps stays under
// max_keys × 256 bytes plus a fixed allowance.
func TestProxyLongKeyFloodMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("sends 90 MB; -race inflates the figures")
	}
	const (
		maxKeys  = 1000
		requests = 1500
		partLen  = 30_000
		slack    = 4 << 20
	)
	up := newUpstream(t)
	ts := start(t, parseConfig(t, fmt.Sprintf(`
store: {max_keys: %d}
listeners:
  - {addr: "127.0.0.1:0"}
  - {addr: "127.0.0.1:0", serve: proxy}
zones:
  - {name: uploads, limits: [5r/10s], key: "header:X-Upload-Pool", group: uploads}
  - {name: uploads-per-user, limits: [3r/10s], key: [cookie:session, client-address], group: uploads}
proxy:
  upstream: %s
  rules: [{path_prefix: /upload, methods: [POST, PUT], zones: [uploads, uploads-per-user]}]
`, maxKeys, up.URL)), Options{})
	pool, session := bytes.Repeat([]byte("p"), partLen), bytes.Repeat([]byte("s"), partLen)
	send := func(i int) {
		copy(pool, fmt.Sprintf("%08d", i))
		copy(session, fmt.Sprintf("%08d", i))
		req, err := http.NewRequest(http.MethodPost, ts.proxy+"/upload", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Upload-Pool", string(pool))
		req.Header.Set("Cookie", "session="+string(session))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	send(-1)
	held := heapGrowth(requests, send)
	t.Logf("%d proxied uploads with %d-byte pool and session: heap grew by %d bytes", requests, partLen, held)
	if bound := int64(maxKeys*256 + slack); held > bound {
		t.Errorf("heap grew by %d bytes, want <= %d (max_keys × 256 + %d)", held, bound, slack)
	}
}
