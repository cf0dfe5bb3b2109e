package redisstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// nastyKeys are user keys that broke the hash tags or key spaces of the
// seeds: braces, colons, spaces, newlines, invalid UTF-8, 10 KB.
var nastyKeys = []string{
	"plain", "a{b}c", "{", "}", "{}", "}{", "a:b", "a:w60000000", " ", "a b",
	"line\nbreak", "\x00", "\xff\xfe", "%41", "A", strings.Repeat("x{}:", 2500),
}

var nastyZones = []string{"", "z", "z{", "}z", "z:1", "z\n"}

// exhaustNasty spends a 2r/m limit on every (zone, key) pair and checks
// that each pair admitted exactly 2, so none shares state with another. It
// returns how many keys the store should have written.
func exhaustNasty(t *testing.T, s *redisstore.Store) int {
	t.Helper()
	l := sluice.Limit{Rate: 2, Window: time.Minute, Algorithm: sluice.Log}
	for _, zone := range nastyZones {
		for _, key := range nastyKeys {
			for i, want := range []bool{true, true, false} {
				if got := mustCheck(t, s, hit(zone, key, l)).Allowed; got != want {
					t.Fatalf("zone %q key %.20q check %d: allowed %v, want %v", zone, key, i+1, got, want)
				}
			}
		}
	}
	return len(nastyZones) * len(nastyKeys)
}

// checkLayout holds every key to <prefix><zone>{<tag>}: one hash tag made
// of printable ASCII, and a bounded length.
func checkLayout(t *testing.T, keys []string, prefix string) {
	t.Helper()
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			t.Errorf("key %q lacks the prefix %q", k, prefix)
		}
		if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || strings.Index(k, "{") > strings.Index(k, "}") {
			t.Errorf("key %q does not have exactly one hash tag", k)
		}
		for i := 0; i < len(k); i++ {
			if k[i] <= ' ' || k[i] >= 0x7f {
				t.Errorf("key %q holds byte %#x", k, k[i])
				break
			}
		}
		if len(k) > len(prefix)+2*66+40 {
			t.Errorf("key %.80q... is %d bytes: long parts are not hashed", k, len(k))
		}
	}
}

func TestNastyKeysStandalone(t *testing.T) {
	srv := redistest.Standalone(t)
	s := newStore(t, srv.Client(), redisstore.Options{Prefix: "nasty:", Now: fixedClock(time.Unix(1_700_000_000, 0))})
	want := exhaustNasty(t, s)
	keys := scanKeys(t, srv.Client(), "*")
	if len(keys) != want {
		t.Fatalf("%d keys in Redis, want %d (one per zone and key)", len(keys), want)
	}
	checkLayout(t, keys, "nasty:")
}

// TestNastyKeysCluster also checks placement: all the states of one key,
// whatever the zone, share a hash slot (so a check on several zones of one
// key is one atomic script), and a Group puts its hits in its slot.
func TestNastyKeysCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewCluster(t)
	s := newStore(t, c.Client(), redisstore.Options{Prefix: "nasty:", Now: fixedClock(time.Unix(1_700_000_000, 0))})
	want := exhaustNasty(t, s)

	// A check across every zone of one key, and one across keys in a
	// group: one slot each, so rueidis (which refuses cross-slot scripts)
	// accepts them and they are decided atomically.
	l := sluice.Limit{Rate: 5, Window: time.Minute}
	for _, key := range nastyKeys {
		var zones sluice.Check
		for _, zone := range nastyZones {
			zones.Hits = append(zones.Hits, sluice.Hit{Zone: "multi" + zone, Key: key, Limit: l})
		}
		zones.Cost = 1
		mustCheck(t, s, zones)
	}
	group := sluice.Check{Group: "{res}:1", Cost: 1}
	for _, key := range nastyKeys {
		group.Hits = append(group.Hits, sluice.Hit{Zone: "g", Key: key, Limit: l})
	}
	mustCheck(t, s, group)

	keys := clusterKeys(t, c, "*")
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	checkLayout(t, names, "nasty:")
	if got, want := len(keys), want+len(nastyKeys)*len(nastyZones)+len(nastyKeys); got != want {
		t.Fatalf("%d keys in the Cluster, want %d", got, want)
	}
	checkSlots(t, c.Client(), names)
}

// checkSlots: keys with the same hash tag are in the same slot, as Redis
// computes it.
func checkSlots(t *testing.T, c rueidis.Client, keys []string) {
	t.Helper()
	slotOfTag := map[string]int64{}
	for _, k := range keys {
		got, err := c.Do(t.Context(), c.B().ClusterKeyslot().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if int64(redistest.Slot(k)) != got {
			t.Fatalf("key %q: slot %d, Redis says %d", k, redistest.Slot(k), got)
		}
		tag := k[strings.Index(k, "{")+1 : strings.Index(k, "}")]
		if s, ok := slotOfTag[tag]; ok && s != got {
			t.Fatalf("tag %q in slots %d and %d", tag, s, got)
		}
		slotOfTag[tag] = got
	}
}
