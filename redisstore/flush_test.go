package redisstore_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// spend runs n checks of l on key and fails unless all are allowed
// (wantDeny: the last is denied).
func spend(t *testing.T, s *redisstore.Store, key string, l sluice.Limit, n int, lastDenied bool) {
	t.Helper()
	for i := range n {
		want := !(lastDenied && i == n-1)
		if got := mustCheck(t, s, hit("", key, l)).Allowed; got != want {
			t.Fatalf("check %d of %d on %q: allowed %v, want %v", i+1, n, key, got, want)
		}
	}
}

// TestScriptFlush: SCRIPT FLUSH between two checks; the next check reloads
// the script (NOSCRIPT, then EVAL) and the state is intact.
func TestScriptFlush(t *testing.T) {
	srv := redistest.Standalone(t)
	s := newStore(t, srv.Client(), redisstore.Options{Now: fixedClock(time.Unix(1_700_000_040, 0))})
	l := sluice.Limit{Rate: 10, Window: time.Minute, Algorithm: sluice.Log}
	spend(t, s, "k", l, 5, false)
	if err := srv.Do("SCRIPT", "FLUSH").Error(); err != nil {
		t.Fatal(err)
	}
	if n, _ := srv.Do("SCRIPT", "EXISTS", "0000000000000000000000000000000000000000").ToArray(); len(n) != 1 {
		t.Fatal("SCRIPT EXISTS did not answer")
	}
	spend(t, s, "k", l, 6, true) // 5 more pass, the 11th is denied
}

func TestScriptFlushCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewCluster(t)
	s := newStore(t, c.Client(), redisstore.Options{Now: fixedClock(time.Unix(1_700_000_040, 0))})
	l := sluice.Limit{Rate: 10, Window: time.Minute, Algorithm: sluice.GCRA}
	keys := []string{"a", "b", "c", "d", "e", "f"}
	for _, k := range keys {
		spend(t, s, k, l, 5, false)
	}
	for _, n := range c.Nodes() {
		if err := n.Do("SCRIPT", "FLUSH").Error(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		spend(t, s, k, l, 6, true)
	}
}
