package openresty

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// parseConf adds /parse?s=SPEC: the module's sluice.parse_limits, one line
// "<rate> <window µs>" per limit, or "err <message>".
const parseConf = `
        location = /parse {
            content_by_lua_block {
                local ls, err = require("sluice").parse_limits(ngx.unescape_uri(ngx.var.arg_s or ""))
                if not ls then return ngx.say("err ", err) end
                for _, l in ipairs(ls) do ngx.say(string.format("%.0f %.0f", l.rate, l.window)) end
            }
        }
`

// TestParseLimitsAsGo: the module reads spec strings as sluice.ParseLimits
// does: the same limits, and an error for the same inputs.
func TestParseLimitsAsGo(t *testing.T) {
	n := startNginx(t, 1, harnessConf(t, parseConf))
	specs := []string{
		"10r/s", "10r/m", "10r/h", "10r/d", " 100r/s ", "1r/5s, 5r/h", "20r/30s", "3r/1h30m", "5r/2d",
		"1r/1.5h", "1r/500ms", "1r/1500us", "1r/1µs", "1000000000r/s", "10000r/36500d",
		"", "r/s", "0r/s", "-1r/s", "+1r/s", "1.5r/s", "10/s", "10r/", "10r/x", "10r/0s", "10r/-1s",
		"10r/1ns", "10r/36501d", "10r/0d", "1000000001r/s", "10r/s,", ",10r/s", "10r/s,,5r/m",
		"10r/s, 5r/m, 1r/1h", "10r/1h1m1s", "10r/1.5", "10r/s5", "10 r/s", "10r/ s", "10r/1h ", "10R/s",
	}
	for _, spec := range specs {
		t.Run(fmt.Sprintf("%q", spec), func(t *testing.T) {
			want, werr := sluice.ParseLimits(spec)
			got := strings.TrimSpace(mustGet(t, n.url+"/parse?s="+url.QueryEscape(spec)))
			if werr != nil {
				if !errors.Is(werr, sluice.ErrInvalid) {
					t.Fatalf("Go: %v", werr)
				}
				if !strings.HasPrefix(got, "err sluice: invalid input: ") {
					t.Fatalf("module parsed %q as %q, Go refuses it: %v", spec, got, werr)
				}
				return
			}
			var lines []string
			for _, l := range want {
				lines = append(lines, fmt.Sprintf("%d %d", l.Rate, l.Window/time.Microsecond))
			}
			if w := strings.Join(lines, "\n"); got != w {
				t.Fatalf("module: %q, Go: %q", got, w)
			}
		})
	}
}
