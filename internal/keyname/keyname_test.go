package keyname

import (
	"strings"
	"testing"
)

func TestKey(t *testing.T) {
	if got, want := Of("hello"), "sha256:2cf24dba5fb0a30e"; got != want {
		t.Errorf("Of(hello) = %q, want %q", got, want)
	}
	secret := "Bearer sk_live_" + strings.Repeat("9", 40)
	if got := Of(secret); strings.Contains(got, "sk_live") || len(got) != len("sha256:")+16 || got == Of(secret+"x") {
		t.Errorf("Of(secret) = %q: want a 16-digit digest that does not contain the key", got)
	}
}
