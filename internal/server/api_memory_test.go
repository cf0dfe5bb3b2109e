package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestLongKeyFloodMemory performs an attack on a real server
// with the memory store: allowed /v1/check requests, each with a new key of
// 65,000 bytes, far more of them than max_keys. The heap the server keeps
// afterwards stays under max_keys × 256 bytes (docs/memstore.md's bound
// per state) plus a fixed allowance for the server's own buffers; keeping
// the keys whole took 65 MB here.
func TestLongKeyFloodMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("sends 100 MB; -race inflates the figures")
	}
	const (
		maxKeys  = 1000
		requests = 1500
		keyLen   = 65_000
		slack    = 4 << 20 // pools, connections, metrics
	)
	ts := start(t, parseConfig(t, fmt.Sprintf(`
store: {max_keys: %d}
listeners: [{addr: "127.0.0.1:0", max_body_bytes: 131072}]
zones: [{name: upload, limits: 100r/h}]
`, maxKeys)), Options{})
	key := bytes.Repeat([]byte("p"), keyLen)
	send := func(i int) {
		copy(key, fmt.Sprintf("%08d", i))
		body := `{"zone":"upload","key":"` + string(key) + `"}`
		resp, err := client.Post(ts.api+"/v1/check", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	send(-1) // warm the pools and the connection
	held := heapGrowth(requests, send)
	t.Logf("%d checks with %d-byte keys: heap grew by %d bytes", requests, keyLen, held)
	if bound := int64(maxKeys*256 + slack); held > bound {
		t.Errorf("heap grew by %d bytes, want <= %d (max_keys × 256 + %d)", held, bound, slack)
	}
}

// TestLocalFallbackLongKeyFloodMemory: the same flood while Redis is down,
// on a zone whose failure policy is local, so that the in-process fallback
// store (a memory store of at most edge.DefaultFallbackMaxKeys states)
// decides: its heap stays bounded the same way.
func TestLocalFallbackLongKeyFloodMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("sends 100 MB; -race inflates the figures")
	}
	const (
		requests = 1500
		keyLen   = 65_000
		slack    = 4 << 20
	)
	r := redistest.Standalone(t)
	ts := start(t, parseConfig(t, `
store: {url: "`+r.URL()+`", timeout: 100ms}
listeners: [{addr: "127.0.0.1:0", max_body_bytes: 131072}]
zones: [{name: upload, limits: 100r/h, failure: local}]
`), Options{})
	r.Kill()
	key := bytes.Repeat([]byte("p"), keyLen)
	send := func(i int) {
		copy(key, fmt.Sprintf("%08d", i))
		body := `{"zone":"upload","key":"` + string(key) + `"}`
		resp, err := client.Post(ts.api+"/v1/check", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(raw, []byte(`"source":"fallback"`)) {
			t.Fatalf("request %d: status %d, want 200 from the fallback (%.200s)", i, resp.StatusCode, raw)
		}
	}
	for i := range 10 { // open the breaker: from then on the fallback answers at once
		send(-1 - i)
	}
	held := heapGrowth(requests, send)
	t.Logf("%d fallback checks with %d-byte keys: heap grew by %d bytes", requests, keyLen, held)
	if bound := int64(requests*256 + slack); held > bound {
		t.Errorf("heap grew by %d bytes, want <= %d (%d states × 256 + %d)", held, bound, requests, slack)
	}
}

// heapGrowth returns how many bytes the process's live heap grew by while
// send(i) ran for i in [0, n), after a collection on each side; idle client
// connections are closed first, so their buffers do not count.
func heapGrowth(n int, send func(int)) int64 {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := range n {
		send(i)
	}
	client.CloseIdleConnections()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	return int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
}
