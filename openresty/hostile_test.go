package openresty

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// dictConf adds /dictstat: the entries of the deny cache's shared dict and
// the longest key and value among them, in bytes.
const dictConf = `
        location = /dictstat {
            content_by_lua_block {
                local d = ngx.shared.sluice_deny
                local n, k, v = 0, 0, 0
                for _, key in ipairs(d:get_keys(0)) do
                    n = n + 1
                    k = math.max(k, #key)
                    local val = d:get(key)
                    if type(val) == "string" then v = math.max(v, #val) end
                end
                ngx.say(n, " ", k, " ", v)
            }
        }
`

func hostileKeys() []string {
	r := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, sluice.MaxKeyLen)
	for i := range noise {
		noise[i] = byte(r.UintN(256))
	}
	return []string{
		strings.Repeat("a", sluice.MaxKeyLen), string(noise), "\xff", "\xc3\x28",
		"{", "}", "}{", "{}", "a{b}c", "{x}:y", "%7B", "a\x00b", "k",
	}
}

// TestHostileKeys: keys of 64 KB, invalid UTF-8, braces, colons and NULs
// give the module the Go store's Redis keys, byte for byte, each short and
// hashed on its own encoded tag: no key or zone moves another's slot, a
// group keeps all its keys in one slot. The deny cache's entries stay
// small whatever the key.
func TestHostileKeys(t *testing.T) {
	srv := redistest.Standalone(t)
	n := startNginx(t, 1, harnessConf(t, dictConf))
	lua := &luaLimiter{url: n.url, redis: srv.URL(), prefix: "lua-h:", edge: true, client: newHTTPClient()}
	gs, err := redisstore.New(srv.Client(), redisstore.Options{Prefix: "go-h:", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	ctx := context.Background()
	limit := sluice.Limit{Rate: 1, Window: time.Hour}
	zones := []string{"", "z{1}", "}:"}
	for _, group := range []string{"", "g{}"} {
		for _, zone := range zones {
			for _, key := range hostileKeys() {
				c := sluice.Check{Hits: []sluice.Hit{{Zone: zone, Key: key, Limit: limit}}, Cost: 1, Group: group}
				for i, want := range []bool{true, false, false} {
					var d, gd sluice.Decision
					if err := lua.Check(ctx, c, &d); err != nil {
						t.Fatal(err)
					}
					if err := gs.Check(ctx, c, &gd); err != nil {
						t.Fatal(err)
					}
					if d.Allowed != want || gd.Allowed != want {
						t.Fatalf("zone %q group %q key of %d bytes, check %d: module %v, Go %v, want %v", zone, group, len(key), i+1, d.Allowed, gd.Allowed, want)
					}
				}
			}
		}
	}
	luaKeys, goKeys := scanKeys(t, srv, "lua-h:"), scanKeys(t, srv, "go-h:")
	if len(luaKeys) != len(goKeys) || len(luaKeys) == 0 {
		t.Fatalf("module wrote %d keys, Go %d", len(luaKeys), len(goKeys))
	}
	for k := range goKeys {
		if !luaKeys[k] {
			t.Errorf("Go wrote %q, the module did not", k)
		}
	}
	slotOfKey := map[string]uint16{}
	for k := range luaKeys {
		if len(k) > 300 {
			t.Errorf("a key of %d bytes: %.80q", len(k), k)
		}
		tag := k[strings.IndexByte(k, '{')+1 : strings.IndexByte(k, '}')]
		if strings.ContainsAny(tag, "{}:") || redistest.Slot("lua-h:"+k) != redistest.Slot(tag) {
			t.Errorf("key %.80q is not hashed on its tag %q", k, tag)
		}
		if strings.Contains(k, "}:W3600000000:") { // a group's key: the tag is the group's
			if tag != "g%7B%7D" {
				t.Errorf("grouped key %.80q has tag %q, want the group's", k, tag)
			}
			continue
		}
		// The same key in every zone: one slot.
		if s, ok := slotOfKey[tag]; ok && s != redistest.Slot(tag) {
			t.Errorf("tag %q in two slots", tag)
		}
		slotOfKey[tag] = redistest.Slot(tag)
	}
	if want := len(hostileKeys()); len(slotOfKey) != want {
		t.Errorf("%d distinct ungrouped tags, want one per key: %d", len(slotOfKey), want)
	}
	var entries, maxKey, maxVal int
	fmt.Sscan(mustGet(t, n.url+"/dictstat"), &entries, &maxKey, &maxVal)
	if entries == 0 || maxKey > 64 || maxVal > 256 {
		t.Errorf("deny cache: %d entries, longest key %d bytes, longest value %d: want some, keys <= 64, values <= 256", entries, maxKey, maxVal)
	}
}

func scanKeys(t *testing.T, srv *redistest.Server, prefix string) map[string]bool {
	t.Helper()
	keys, err := srv.Do("KEYS", prefix+"*").AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, k := range keys {
		out[strings.TrimPrefix(k, prefix)] = true
	}
	return out
}
