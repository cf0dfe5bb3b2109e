package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestRestartNoStaleConnection: after Redis restarts, every check is
// decided by the new process. The client spreads calls over several
// connections; checks on many keys, one at a time, use them all before the
// restart. A connection to the old process that nobody reads would be
// noticed only by the next call on it, which fails (EOF): a check made
// fail-open (under-counted) although Redis is back.
func TestRestartNoStaleConnection(t *testing.T) {
	srv := redistest.Standalone(t)
	s := dialStore(t, srv.URL(), redisstore.Options{})
	l := sluice.Limit{Rate: 100, Window: time.Hour}
	for i := range 64 {
		mustCheck(t, s, hit("z", "k"+strconv.Itoa(i), l))
	}
	srv.Restart() // answers PING when it returns
	for i := range 64 {
		var d sluice.Decision
		if err := s.Check(context.Background(), hit("z", "k"+strconv.Itoa(i), l), &d); err != nil {
			t.Errorf("check %d after the restart: %v", i+1, err)
		}
	}
}
