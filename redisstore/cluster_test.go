package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/redisstore"
)

// keysInTwoSlots returns two plain keys whose hash slots differ.
func keysInTwoSlots() (string, string) {
	a := "alpha"
	for i := 0; ; i++ {
		b := fmt.Sprint("beta", i)
		if redistest.Slot(b) != redistest.Slot(a) {
			return a, b
		}
	}
}

// TestCrossSlotRefund: a check whose hits are in two slots, denied in one,
// leaves nothing recorded in the other, for every algorithm; an allowed one
// records in both.
func TestCrossSlotRefund(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewCluster(t)
	at := time.Unix(1_700_000_040, 0)
	a, b := keysInTwoSlots()
	for _, algo := range sluice.Algorithms() {
		t.Run(string(algo), func(t *testing.T) {
			s := newStore(t, c.Client(), redisstore.Options{Now: fixedClock(at), Prefix: "refund-" + string(algo) + ":"})
			l := sluice.Limit{Rate: 3, Window: time.Minute, Algorithm: algo}
			both := sluice.Check{Cost: 1, Hits: []sluice.Hit{{Key: a, Limit: l}, {Key: b, Limit: l}}}
			if d := mustCheck(t, s, both); !d.Allowed || d.Hits[0].Used != 1 || d.Hits[1].Used != 1 {
				t.Fatalf("first check across slots: %+v, want allowed with Used 1 on both", d)
			}
			mustCheck(t, s, hit("", b, l))
			mustCheck(t, s, hit("", b, l)) // b is full: 3
			d := mustCheck(t, s, both)
			if d.Allowed || storetest.DenierOf(d) != 1 || !d.Hits[0].Allowed {
				t.Fatalf("check denied by b: %+v", d)
			}
			if d.Hits[0].Used != 1 {
				t.Errorf("a's Used in the denied check = %v, want 1 (before the check)", d.Hits[0].Used)
			}
			peek := hit("", a, l)
			peek.Cost = 0
			if used := mustCheck(t, s, peek).Hits[0].Used; used > 1+1e-9 {
				t.Fatalf("a's usage after the refund = %v, want 1: the denied check was not refunded", used)
			}
			for i := range 2 {
				if !mustCheck(t, s, hit("", a, l)).Allowed {
					t.Fatalf("a check %d denied: the refunded cost still counts", i+2)
				}
			}
		})
	}
}
