package bench

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/redistest"
)

// minimalScript is the simplest sliding window a user could write: two
// fixed-window counters in plain integer keys named by the window index,
// Redis TIME in integer milliseconds, allowed or not as the reply. It is
// not sluice's contract (no Used, Remaining or waits; keys built inside
// the script, so not for Redis Cluster), which is why it is the floor to
// compare with.
//
// KEYS[1]: the key's prefix. ARGV[1]: the limit; ARGV[2]: the window in ms.
// Reply: 1 allowed (and counted), 0 denied.
const minimalScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit, w = tonumber(ARGV[1]), tonumber(ARGV[2])
local idx = math.floor(now / w)
local cur_key, prev_key = KEYS[1] .. ':' .. idx, KEYS[1] .. ':' .. (idx - 1)
local cur = tonumber(redis.call('GET', cur_key) or '0')
local prev = tonumber(redis.call('GET', prev_key) or '0')
if prev * (w - (now - idx * w)) / w + cur + 1 > limit then return 0 end
redis.call('INCR', cur_key)
redis.call('PEXPIRE', cur_key, 2 * w)
return 1
`

// minimalRedis runs minimalScript with one EVALSHA per check through a
// rueidis client, whose automatic pipelining sends concurrent calls
// together.
func minimalRedis(b *testing.B, srv *redistest.Server, w workload) contender {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		b.Fatalf("rueidis: %v", err)
	}
	script := rueidis.NewLuaScript(minimalScript)
	args := []string{strconv.FormatInt(w.rate, 10), strconv.FormatInt(w.window.Milliseconds(), 10)}
	return contender{
		name: "minimal-script",
		caller: func() decideFunc {
			keys := make([]string, 1)
			return func(ctx context.Context, key string) (bool, error) {
				keys[0] = "min:" + key
				n, err := script.Exec(ctx, client, keys, args).AsInt64()
				return n == 1, err
			}
		},
		close: client.Close,
	}
}
