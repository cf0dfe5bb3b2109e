package server

import (
	"encoding/json"
	"testing"
)

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "alice", `q"uote\back`, "tab\tnl\nnul\x00\x1f\x7f", "é ☃ 𝄞", "bad\xffutf8\xc3", "\u2028\u2029", "<&>"} {
		got := string(appendJSONString(nil, s))
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Errorf("%q: %s is not a JSON string: %v", s, got, err)
			continue
		}
		want, _ := json.Marshal(s)
		var wantBack string
		json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("%q: decodes to %q, encoding/json's to %q", s, back, wantBack)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add("alice")
	f.Add("bad\xffutf8")
	f.Fuzz(func(t *testing.T, s string) {
		var got, want string
		if err := json.Unmarshal(appendJSONString(nil, s), &got); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		enc, _ := json.Marshal(s)
		json.Unmarshal(enc, &want)
		if got != want {
			t.Fatalf("%q: got %q, want %q", s, got, want)
		}
	})
}
