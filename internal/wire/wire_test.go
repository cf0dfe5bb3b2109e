package wire

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestResponseRoundTrip: what AppendResponse writes, encoding/json reads
// back into the same Response, for awkward strings and numbers too.
func TestResponseRoundTrip(t *testing.T) {
	for _, r := range []Response{
		{Allowed: true, Zone: "api", Source: "store", Limits: []Limit{}},
		{Zone: "z", Source: "fail-closed", RetryAfter: 1, Limits: []Limit{}},
		{Allowed: false, Zone: "per-ip", Source: "store", Shadowed: true, RetryAfter: 12.5, Limits: []Limit{
			{Key: "203.0.113.9", Name: "burst", Limit: "10r/s", Algorithm: "gcra", Used: 10, Remaining: 0, RetryAfter: 0.1, ResetAfter: 1},
			{Key: "q\"uo\\te\t\n\x01 é 𝄞 \u2028 <&>", Name: "hourly", Limit: "1000r/h", Algorithm: "sliding-window", Allowed: true, Shadow: true, Used: 3.25, Remaining: 996, ResetAfter: 3599.999999},
		}},
	} {
		raw := AppendResponse(nil, &r)
		var back Response
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Errorf("round trip of %+v\n gave %+v\n via %s", r, back, raw)
		}
		if !strings.HasSuffix(string(raw), "}\n") {
			t.Errorf("%q: want one line", raw)
		}
	}
	raw := AppendResponse(nil, &Response{RetryAfter: math.NaN(), Limits: []Limit{{Used: math.Inf(1)}}})
	if err := json.Unmarshal(raw, new(Response)); err != nil {
		t.Errorf("NaN and Inf: %s is not JSON: %v", raw, err)
	}
}

// TestRequestRoundTrip: a Request encoding/json writes, or AppendRequest
// writes, DecodeRequest reads back.
func TestRequestRoundTrip(t *testing.T) {
	cost := int64(0)
	for _, r := range []Request{
		{Zone: "api", Key: "alice"},
		{Zone: "api", Keys: []string{"a", "b\"\\\u2028é"}, Cost: &cost},
	} {
		raw, _ := json.Marshal(r)
		back, err := DecodeRequest(raw)
		if err != nil || !reflect.DeepEqual(*back, r) {
			t.Errorf("DecodeRequest(%s) = %+v, %v; want %+v", raw, back, err, r)
		}
	}
	raw := AppendRequest(nil, "z", "k\x00\"é", 3)
	back, err := DecodeRequest(raw)
	if err != nil || back.Zone != "z" || back.Key != "k\x00\"é" || back.Cost == nil || *back.Cost != 3 {
		t.Errorf("DecodeRequest(%s) = %+v, %v", raw, back, err)
	}
}

// TestDecodeRequestStrict: request bodies that encoding/json accepts and
// DecodeRequest refuses.
func TestDecodeRequestStrict(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"{\"zone\":\"z\",\"key\":\"\xff\xfe\"}", "not valid UTF-8"},
		{"{\"zone\":\"z\",\"key\":\"\x80\x81\"}", "not valid UTF-8"},
		{`{"zone":"z","key":"\ud800"}`, "lone UTF-16 surrogate"},
		{`{"zone":"z","key":"\udc00\ud800"}`, "lone UTF-16 surrogate"},
		{`{"zone":"z","key":"x\ud83d"}`, "lone UTF-16 surrogate"},
		{`{"zone":"z","key":"a","key":"b"}`, `"key" appears twice`},
		{`{"zone":"z","zone":"z","key":"a"}`, `"zone" appears twice`},
		{`{"ZONE":"z","key":"a"}`, `unknown field "ZONE"`},
		{`{"zone":"z","Key":"a"}`, `unknown field "Key"`},
		{`{"zone":"z","key":"a","extra":1}`, `unknown field "extra"`},
		{`{"zone":"z","key":"a"} {}`, "after top-level value"},
		{`["zone"]`, `the body is a JSON array; want a JSON object such as {"zone": "name", "key": "k"}`},
		{`"zone"`, "the body is a JSON string; want a JSON object"},
		{`{"zone":"z","key":1}`, `field "key" is a JSON number; want a string`},
		{`{"zone":"z","keys":"a"}`, `field "keys" is a JSON string; want an array of strings`},
		{`{"zone":"z","key":"a","cost":1.5}`, `field "cost" is a JSON number 1.5; want an integer`},
		{``, "unexpected end"},
	} {
		_, err := DecodeRequest([]byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeRequest(%q) = %v, want an error containing %q", c.body, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "Go value") || strings.Contains(err.Error(), "wire.")) {
			t.Errorf("DecodeRequest(%q) = %v, which names a Go type", c.body, err)
		}
	}
	for _, body := range []string{
		`{"zone":"z","key":"\ufffd\ufffd"}`,         // U+FFFD itself is a character
		`{"zone":"z","key":"\ud83d\ude00 \\ud800"}`, // a pair; an escaped backslash
		`{"zone":"z","key":"é"}`,
		`{"zon\u0065":"z","key":"a"}`, // the name is "zone", escaped or not
	} {
		if _, err := DecodeRequest([]byte(body)); err != nil {
			t.Errorf("DecodeRequest(%s): %v, want it accepted", body, err)
		}
	}
}

// FuzzDecodeRequest: whatever DecodeRequest accepts is valid UTF-8 and
// survives a round trip through encoding/json unchanged.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"zone":"z","key":"a"}`))
	f.Add([]byte(`{"zone":"z","keys":["\ud83d\ude00","b"],"cost":0}`))
	f.Add([]byte("{\"zone\":\"z\",\"key\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := DecodeRequest(raw)
		if err != nil {
			return
		}
		if len(r.Keys) == 0 {
			r.Keys = nil // "keys":[] and no keys mean the same
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeRequest(enc)
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("%q decoded to %+v; re-encoded %s decoded to %+v, %v", raw, r, enc, back, err)
		}
	})
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "alice", `q"uote\back`, "tab\tnl\nnul\x00\x1f\x7f", "é ☃ 𝄞", "bad\xffutf8\xc3", "\u2028\u2029", "<&>"} {
		var got, want string
		if err := json.Unmarshal(AppendString(nil, s), &got); err != nil {
			t.Errorf("%q: %s is not a JSON string: %v", s, AppendString(nil, s), err)
			continue
		}
		enc, _ := json.Marshal(s)
		json.Unmarshal(enc, &want)
		if got != want {
			t.Errorf("%q: decodes to %q, encoding/json's to %q", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("alice")
	f.Add("bad\xffutf8")
	f.Fuzz(func(t *testing.T, s string) {
		var got, want string
		if err := json.Unmarshal(AppendString(nil, s), &got); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		enc, _ := json.Marshal(s)
		json.Unmarshal(enc, &want)
		if got != want {
			t.Fatalf("%q: got %q, want %q", s, got, want)
		}
	})
}
