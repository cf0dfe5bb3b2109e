package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestRecordBatch: records add their cost where it fits and nothing where
// it does not, for every algorithm, so what a check sees afterwards is
// what the records admitted; a shadow limit records either way; a record on
// a key of another type fails alone (-1); a record of two hits is refused
// before anything is sent.
func TestRecordBatch(t *testing.T) {
	srv := redistest.Standalone(t)
	at := time.Unix(1_700_000_040, 0)
	for _, algo := range sluice.Algorithms() {
		t.Run(string(algo), func(t *testing.T) {
			s := newStore(t, srv.Client(), redisstore.Options{Now: fixedClock(at), Prefix: "rec-" + string(algo) + ":"})
			l := sluice.Limit{Rate: 3, Window: time.Minute, Algorithm: algo}
			// 700 records, more than one call: a, b and c get 2 each, then
			// one more each, then a fourth (a and b: full), and 688 on
			// other keys.
			var recs []sluice.Check
			for range 3 {
				recs = append(recs, hit("z", "a", l), hit("z", "b", l), hit("z", "c", l))
			}
			recs[0].Cost, recs[1].Cost = 2, 2 // a and b: 2 + 1 + 2, the last does not fit
			recs = append(recs, hit("z", "a", l), hit("z", "b", l))
			shadow := l
			shadow.Shadow = true
			for i := len(recs); i < 700; i++ {
				recs = append(recs, hit("z", fmt.Sprint("other-", i), l))
			}
			recs[699] = hit("z", "shadowed", shadow)
			recs[699].Cost = 3 // twice the rate in all: a shadow limit records it
			recs[698] = recs[699]
			recorded := make([]int64, len(recs))
			if err := s.RecordBatch(context.Background(), recs, recorded, nil); err != nil {
				t.Fatal(err)
			}
			want := map[string]int64{"a": 3, "b": 3, "c": 3}
			got := map[string]int64{}
			for i, r := range recorded {
				if r < 0 {
					t.Fatalf("record %d: %d", i, r)
				}
				got[recs[i].Hits[0].Key] += r
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("key %s: recorded %d, want %d", k, got[k], w)
				}
			}
			if recorded[9] != 0 || recorded[10] != 0 {
				t.Errorf("the records past the limit: %v, want 0 (not recorded)", recorded[9:11])
			}
			for _, k := range []string{"a", "b", "c"} {
				if d := mustCheck(t, s, hit("z", k, l)); d.Allowed {
					t.Errorf("key %s after its records: %+v, want denied (full)", k, d)
				}
			}
			if d := mustCheck(t, s, hit("z", "other-100", l)); !d.Allowed || d.Hits[0].Used != 2 {
				t.Errorf("a key recorded once: %+v, want allowed with Used 2 (1 recorded, 1 now)", d.Hits[0])
			}
			peek := hit("z", "shadowed", shadow)
			peek.Cost = 0
			if d := mustCheck(t, s, peek); d.Hits[0].Used < 6 {
				t.Errorf("the shadow limit's record: Used %v, want 6", d.Hits[0].Used)
			}
		})
	}
	t.Run("bad state", func(t *testing.T) {
		s := newStore(t, srv.Client(), redisstore.Options{Prefix: "recbad:"})
		l := sluice.Limit{Rate: 3, Window: time.Minute}
		if err := srv.Do("LPUSH", "recbad:{foreign}:W60000000", "x").Error(); err != nil {
			t.Fatal(err)
		}
		recs := []sluice.Check{hit("", "fine", l), hit("", "foreign", l), hit("", "fine2", l)}
		recorded := make([]int64, 3)
		if err := s.RecordBatch(context.Background(), recs, recorded, nil); err != nil {
			t.Fatal(err)
		}
		if recorded[0] != 1 || recorded[1] != -1 || recorded[2] != 1 {
			t.Errorf("recorded %v, want [1 -1 1]: the foreign key fails alone", recorded)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		s := newStore(t, srv.Client(), redisstore.Options{Prefix: "recinv:"})
		l := sluice.Limit{Rate: 3, Window: time.Minute}
		two := hit("", "x", l)
		two.Hits = append(two.Hits, sluice.Hit{Key: "y", Limit: l})
		zero := hit("", "x", l)
		zero.Cost = 0
		for _, c := range []sluice.Check{two, zero} {
			err := s.RecordBatch(context.Background(), []sluice.Check{c}, make([]int64, 1), nil)
			if !errors.Is(err, sluice.ErrInvalid) {
				t.Errorf("record %+v: %v, want ErrInvalid", c, err)
			}
		}
	})
}

// TestRecordBatchCluster: records spread over the slots of a Cluster are
// each recorded on their own master, one call per slot.
func TestRecordBatchCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewCluster(t)
	s := newStore(t, c.Client(), redisstore.Options{Prefix: "reccl:"})
	l := sluice.Limit{Rate: 2, Window: time.Minute}
	var recs []sluice.Check
	for i := range 300 {
		recs = append(recs, hit("", fmt.Sprint("k", i%100), l)) // 3 each: 2 fit
	}
	recorded := make([]int64, len(recs))
	if err := s.RecordBatch(context.Background(), recs, recorded, nil); err != nil {
		t.Fatal(err)
	}
	sum := int64(0)
	for _, r := range recorded {
		sum += r
	}
	if sum != 200 {
		t.Errorf("recorded %d in all, want 200 (2 of 3 on each of 100 keys)", sum)
	}
	if keys := clusterKeys(t, c, "reccl:*"); len(keys) != 100 {
		t.Errorf("%d keys on the masters, want 100", len(keys))
	}
}

// scriptOnly is a Scripter that only runs scripts: RecordBatch then sends
// every record in record.lua, never plain SET commands.
type scriptOnly struct{ redisstore.Scripter }

// TestRecordBatchPlainSetsAsScript: a sliding window recorded on a key not
// stored yet by a pipelined SET ... NX holds exactly the bytes record.lua
// writes, with the same TTL, and a check reads it the same; keys already
// stored go through the script.
func TestRecordBatchPlainSetsAsScript(t *testing.T) {
	srv := redistest.Standalone(t)
	at := time.Unix(1_700_000_047, 250_000_000)
	for _, window := range []time.Duration{time.Second, time.Minute, time.Hour} {
		l := sluice.Limit{Rate: 5, Window: window}
		plain := newStore(t, srv.Client(), redisstore.Options{Now: fixedClock(at), Prefix: "plain:"})
		script := scripterStore(t, scriptOnly{redisstore.NewScripter(srv.Client())}, redisstore.Options{Now: fixedClock(at), Prefix: "script:"})
		var recs []sluice.Check
		for i := range 50 {
			c := hit("z", fmt.Sprint("k", i, "-", window), l)
			c.Cost = int64(1 + i%5)
			recs = append(recs, c)
		}
		recs = append(recs, recs[:10]...) // stored now: by the script in both
		for _, s := range []*redisstore.Store{plain, script} {
			recorded := make([]int64, len(recs))
			if err := s.RecordBatch(context.Background(), recs, recorded, nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range recs[:50] {
			key := "z{" + c.Hits[0].Key + "}:W" + fmt.Sprint(window.Microseconds())
			a, errA := srv.Do("GET", "plain:"+key).ToString()
			b, errB := srv.Do("GET", "script:"+key).ToString()
			if errA != nil || errB != nil || a != b {
				t.Fatalf("window %v, key %s: plain SET wrote %q (%v), the script %q (%v)", window, c.Hits[0].Key, a, errA, b, errB)
			}
			ta, _ := srv.Do("PTTL", "plain:"+key).AsInt64()
			tb, _ := srv.Do("PTTL", "script:"+key).AsInt64()
			if ta <= 0 || tb <= 0 || ta-tb > 2000 || tb-ta > 2000 {
				t.Errorf("window %v: PTTL %d after a plain SET, %d after the script", window, ta, tb)
			}
		}
	}
}

// TestRecordBatchCreated: RecordBatch says which records created their
// key's state: a sliding window not stored yet (its plain SET ... NX), once
// per key; not a record of a key stored already, nor a second record of
// the same key in the batch, nor one that went through record.lua (another
// algorithm).
func TestRecordBatchCreated(t *testing.T) {
	srv := redistest.Standalone(t)
	s := newStore(t, srv.Client(), redisstore.Options{Prefix: "created:"})
	w := sluice.Limit{Rate: 3, Window: time.Minute, Algorithm: sluice.SlidingWindow}
	g := sluice.Limit{Rate: 3, Window: time.Minute, Algorithm: sluice.GCRA}
	var d sluice.Decision
	if err := s.Check(context.Background(), hit("z", "stored", w), &d); err != nil {
		t.Fatal(err)
	}
	recs := []sluice.Check{hit("z", "new", w), hit("z", "stored", w), hit("z", "new", w), hit("z", "gcra", g)}
	recorded := make([]int64, len(recs))
	created := []bool{true, true, true, true} // cleared by the call
	if err := s.RecordBatch(context.Background(), recs, recorded, created); err != nil {
		t.Fatal(err)
	}
	want := []bool{true, false, false, false}
	for i := range recs {
		if created[i] != want[i] || recorded[i] != 1 {
			t.Errorf("record %d (%s): created %v, recorded %d; want created %v, recorded 1", i, recs[i].Hits[0].Key, created[i], recorded[i], want[i])
		}
	}
	if err := s.RecordBatch(context.Background(), recs, recorded, created[:1]); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("created shorter than the records: %v, want ErrInvalid", err)
	}
}
