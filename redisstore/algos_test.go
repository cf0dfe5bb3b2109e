package redisstore

import (
	"regexp"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/ident"
)

// TestScriptsKnowTheTable enumerates internal/ident's algorithm table: the
// dispatch tables of decide.lua and refund.lua hold exactly its codes, and
// the Go side decodes every algorithm's snapshot. A new algorithm in the
// table fails here until the scripts and the decoder know it.
func TestScriptsKnowTheTable(t *testing.T) {
	var want []string
	for _, a := range ident.Algos() {
		want = append(want, string(a.Code))
	}
	slices.Sort(want)
	for _, tt := range []struct{ file, table string }{
		{"decide.lua", "LOAD"}, {"decide.lua", "RECORD"}, {"decide.lua", "SNAP"}, {"refund.lua", "REFUND"},
	} {
		m := regexp.MustCompile(`(?m)^local ` + tt.table + ` = \{([^}]*)\}`).FindStringSubmatch(mustRead(tt.file))
		if m == nil {
			t.Fatalf("%s: no table %s", tt.file, tt.table)
		}
		var got []string
		for _, e := range regexp.MustCompile(`(\w+) = `).FindAllStringSubmatch(m[1], -1) {
			got = append(got, e[1])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %s has codes %v, the table %v", tt.file, tt.table, got, want)
		}
	}
	for _, a := range ident.Algos() {
		sp := spec{code: a.Code, rate: 10, window: 60e6, bucket: 6e6}
		if !a.Bucketed {
			sp.bucket = sp.window
		}
		snap := make([]int64, sp.snapLen()-1)
		r := result(sp, hitReply{fits: true, snap: snap}, 1_700_000_000e6, 1, true)
		if r.Used != 1 || r.Remaining != 9 {
			t.Errorf("%s: result of an empty snapshot plus 1 = %+v, want Used 1, Remaining 9", a.Name, r)
		}
	}
}
