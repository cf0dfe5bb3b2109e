// Package openresty holds sluice's OpenResty module, in Lua, under lib/:
// nginx workers decide checks in-process with redisstore's own scripts,
// keys and replies, so that they share one exact limit with Go processes
// on one Redis. docs/openresty.md is its manual.
//
// The Go package has no API: its tests run the module in a real nginx
// (Debian's libnginx-mod-http-lua) against real Redis servers, standalone
// and Cluster, and hold it to the conformance suite of internal/storetest
// and to the Go store's decisions. lib/sluice/scripts.lua is generated from
// redisstore/scripts by TestScriptsInSync (go test ./openresty -run
// TestScriptsInSync -update), which fails when the two differ.
package openresty
