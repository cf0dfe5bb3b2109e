package redisstore

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// nastyKeys are keys that broke the hash tags or key spaces of the seeds.
var nastyKeys = []string{
	"plain", "a{b}c", "{", "}", "{}", "}{", "a:b", "a:w60000000", " ", "a b",
	"line\nbreak", "\r\n", "\x00", "\xff\xfe", "é", "%", "%41", "%H00",
	strings.Repeat("k", maxPart), strings.Repeat("k", maxPart+1), strings.Repeat("x{}:", 2500), // 10 KB
}

// decodePart inverts encodePart for parts that were not hashed.
func decodePart(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			t.Fatalf("bad escape in %q: %v", s, err)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String()
}

func checkEncoding(t *testing.T, in string) {
	t.Helper()
	out := encodePart(in)
	for i := 0; i < len(out); i++ {
		if c := out[i]; c <= ' ' || c >= 0x7f || c == '{' || c == '}' || c == ':' {
			t.Fatalf("encodePart(%q) = %q holds byte %q", in, out, c)
		}
	}
	if len(out) > maxPart+2 {
		t.Fatalf("encodePart(%q) is %d bytes, more than %d", in, len(out), maxPart+2)
	}
	if strings.HasPrefix(out, "%H") {
		if len(out) != 66 {
			t.Fatalf("hashed part %q is not %%H + 64 hex digits", out)
		}
		return
	}
	if got := decodePart(t, out); got != in {
		t.Fatalf("encodePart(%q) = %q decodes to %q", in, out, got)
	}
}

func TestEncodePart(t *testing.T) {
	for _, k := range nastyKeys {
		checkEncoding(t, k)
	}
	if got := encodePart("user42"); got != "user42" {
		t.Errorf("encodePart(user42) = %q: plain keys should read as they are", got)
	}
}

func FuzzEncodePart(f *testing.F) {
	for _, k := range nastyKeys {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, s string) { checkEncoding(t, s) })
}

func TestStateKeyLayout(t *testing.T) {
	l := sluice.Limit{Rate: 10, Window: time.Minute}
	b := sluice.Limit{Rate: 10, Window: time.Minute, Algorithm: sluice.Buckets, Resolution: 10 * time.Second}
	tests := []struct {
		hit   sluice.Hit
		group string
		want  string
	}{
		{sluice.Hit{Zone: "api", Key: "1.2.3.4", Limit: l}, "", "sluice:api{1.2.3.4}:W60000000"},
		{sluice.Hit{Zone: "", Key: "a{b}:c", Limit: l}, "", "sluice:{a%7Bb%7D%3Ac}:W60000000"},
		{sluice.Hit{Zone: "z{", Key: "k", Limit: b}, "", "sluice:z%7B{k}:B60000000/10000000"},
		{sluice.Hit{Zone: "api", Key: "alice", Limit: l}, "res 1", "sluice:api{res%201}:W60000000:alice"},
	}
	for _, tt := range tests {
		key, _ := stateKey("sluice:", stateOf(tt.hit, tt.group))
		if key != tt.want {
			t.Errorf("stateKey(%q, %q, group %q) = %q, want %q", tt.hit.Zone, tt.hit.Key, tt.group, key, tt.want)
		}
	}
}

// TestStateKeysDistinct: every (zone, key, group, identity) among the
// nasty inputs gets its own key, and the hash tag Redis sees is the one
// stateKey meant.
func TestStateKeysDistinct(t *testing.T) {
	limits := []sluice.Limit{
		{Rate: 10, Window: time.Minute},
		{Rate: 10, Window: time.Minute, Algorithm: sluice.Log},
		{Rate: 10, Window: time.Second},
		{Rate: 10, Window: time.Minute, Algorithm: sluice.Buckets},
		{Rate: 10, Window: time.Minute, Algorithm: sluice.Buckets, Resolution: time.Second},
	}
	seen := map[string]string{}
	for _, zone := range nastyKeys[:10] {
		for _, key := range nastyKeys {
			for _, group := range []string{"", "g", "{g}"} {
				for li, l := range limits {
					k, tag := stateKey("p:", stateOf(sluice.Hit{Zone: zone, Key: key, Limit: l}, group))
					id := strconv.Quote(zone) + " " + strconv.Quote(key) + " " + strconv.Quote(group) + " " + strconv.Itoa(li)
					if other, dup := seen[k]; dup {
						t.Fatalf("%s and %s share key %q", id, other, k)
					}
					seen[k] = id
					open := strings.IndexByte(k, '{')
					end := strings.IndexByte(k[open+1:], '}')
					if got := k[open+1 : open+1+end]; got != tag {
						t.Fatalf("%s: Redis would hash %q, want tag %q", id, got, tag)
					}
				}
			}
		}
	}
}
