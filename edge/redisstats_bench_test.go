package edge_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
)

// redisStats is what INFO says of a Redis's work so far: calls and µs per
// command, and the µs its active expiry cycle took.
type redisStats struct {
	calls, usec map[string]float64
	expireMs    float64
	expired     float64
}

func readRedisStats(b *testing.B, srv *redistest.Server) redisStats {
	b.Helper()
	st := redisStats{calls: map[string]float64{}, usec: map[string]float64{}}
	for _, section := range []string{"commandstats", "stats"} {
		text, err := srv.Do("INFO", section).ToString()
		if err != nil {
			b.Fatalf("INFO %s: %v", section, err)
		}
		for line := range strings.SplitSeq(text, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			switch {
			case strings.HasPrefix(k, "cmdstat_"):
				cmd := strings.TrimPrefix(k, "cmdstat_")
				for f := range strings.SplitSeq(v, ",") {
					name, val, _ := strings.Cut(f, "=")
					x, _ := strconv.ParseFloat(val, 64)
					switch name {
					case "calls":
						st.calls[cmd] = x
					case "usec":
						st.usec[cmd] = x
					}
				}
			case k == "expire_cycle_cpu_milliseconds":
				st.expireMs, _ = strconv.ParseFloat(v, 64)
			case k == "expired_keys":
				st.expired, _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return st
}

// reportRedisStats reports per op, since s0: the calls and µs of each
// command Redis ran (but INFO), and the expiry cycle's µs and keys.
func reportRedisStats(b *testing.B, s0, s1 redisStats) {
	n := float64(b.N)
	for cmd, c := range s1.calls {
		if strings.HasPrefix(cmd, "info") || strings.HasPrefix(cmd, "config") {
			continue
		}
		if d := c - s0.calls[cmd]; d > 0 {
			b.ReportMetric(d/n, cmd+"-calls/op")
			b.ReportMetric((s1.usec[cmd]-s0.usec[cmd])*1000/n, cmd+"-ns/op")
		}
	}
	b.ReportMetric((s1.expireMs-s0.expireMs)*1e6/n, "expire-ns/op")
	b.ReportMetric((s1.expired-s0.expired)/n, "expired/op")
}
