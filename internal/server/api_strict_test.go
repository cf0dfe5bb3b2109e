package server

import (
	"net/http"
	"testing"
)

// TestStrictJSON performs an attack on a real server: bodies
// that encoding/json accepts but reads as something else (invalid UTF-8
// folded into U+FFFD so that different keys share a counter, a duplicate
// field deciding silently, a field name in the wrong case) are refused
// with 400 on /v1/check and /v1/reset, and spend nothing.
func TestStrictJSON(t *testing.T) {
	ts := start(t, parseConfig(t, apiConfig), Options{})
	for _, c := range []struct{ body, detail string }{
		{"{\"zone\":\"three\",\"key\":\"\xff\xfe\"}", "not valid UTF-8"},
		{"{\"zone\":\"three\",\"key\":\"\x80\x81\"}", "not valid UTF-8"},
		{`{"zone":"three","key":"\udfff\udfff"}`, "lone UTF-16 surrogate"},
		{`{"zone":"three","key":"a","key":"b"}`, `"key" appears twice`},
		{`{"zone":"three","keys":["a"],"keys":["b"]}`, `"keys" appears twice`},
		{`{"ZONE":"three","key":"a"}`, `unknown field "ZONE"`},
		{`{"zone":"three","Key":"a"}`, `unknown field "Key"`},
		{`{"zone":"three","key":"a","Cost":5}`, `unknown field "Cost"`},
		// Said plainly, without Go's type names (wire.Request).
		{`[{"zone":"three","key":"a"}]`, `the body is a JSON array; want a JSON object such as {"zone": "name", "key": "k"}`},
		{`{"zone":"three","key":["a"]}`, `field "key" is a JSON array; want a string`},
	} {
		for _, path := range []string{"/v1/check", "/v1/reset"} {
			resp, raw := post(t, ts.api+path, c.body)
			wantProblem(t, resp, raw, http.StatusBadRequest, c.detail)
		}
	}
	// U+FFFD itself is a key like any other, and has its full quota: the
	// refused bodies spent nothing.
	for i := range 3 {
		if resp, raw := post(t, ts.api+"/v1/check", `{"zone":"three","key":"\ufffd\ufffd"}`); resp.StatusCode != http.StatusOK {
			t.Fatalf("check %d of U+FFFD U+FFFD: status %d (%s), want 200", i, resp.StatusCode, raw)
		}
	}
	if resp, raw := post(t, ts.api+"/v1/check", `{"zone":"three","key":"a"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("key a after refused bodies: status %d (%s), want 200", resp.StatusCode, raw)
	}
}
