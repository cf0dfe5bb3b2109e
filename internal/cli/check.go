package cli

import (
	"context"
	"fmt"
	"strconv"
)

// checkPath and resetPath are the server's decision API.
const (
	checkPath = "/v1/check"
	resetPath = "/v1/reset"
)

// checkBody returns a builder of the JSON body of POST /v1/check for one
// key.
func checkBody(zone string, cost int64) func(dst []byte, key string) []byte {
	return func(dst []byte, key string) []byte {
		dst = append(dst, '{')
		if zone != "" {
			dst = append(dst, `"zone":`...)
			dst = strconv.AppendQuote(dst, zone)
			dst = append(dst, ',')
		}
		dst = append(dst, `"key":`...)
		dst = strconv.AppendQuote(dst, key)
		dst = append(dst, `,"cost":`...)
		dst = strconv.AppendInt(dst, cost, 10)
		return append(dst, '}')
	}
}

var checkCommand = command{
	name:    "check",
	summary: "(not built yet)",
	run: func(ctx context.Context, env Env, args []string) int {
		fmt.Fprintln(env.Stderr, "sluice check: not built yet")
		return 1
	},
}
