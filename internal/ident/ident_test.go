package ident

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/algo"
)

// stateTypes are the algo states of each name, as internal/algo's own tests
// name them.
var stateTypes = map[string]reflect.Type{
	"sliding-window": reflect.TypeFor[*algo.Window](),
	"buckets":        reflect.TypeFor[*algo.Buckets](),
	"log":            reflect.TypeFor[*algo.Log](),
	"decay":          reflect.TypeFor[*algo.Decay](),
	"gcra":           reflect.TypeFor[*algo.GCRA](),
}

// TestTable enumerates the table: every entry is complete, and names,
// codes and IDs are unique, so that every lookup finds one algorithm.
func TestTable(t *testing.T) {
	names, codes := map[string]bool{}, map[byte]bool{}
	types := map[reflect.Type]bool{}
	for i, a := range Algos() {
		t.Run(a.Name, func(t *testing.T) {
			if a.Name == "" || names[a.Name] {
				t.Errorf("name %q empty or repeated", a.Name)
			}
			if a.Code < 'a' || a.Code > 'z' || codes[a.Code] {
				t.Errorf("code %q is not a lower-case letter or is repeated", a.Code)
			}
			if got, want := int(a.ID), i+1; got != want {
				t.Errorf("ID = %d, want %d (1 + position)", got, want)
			}
			if got, want := a.KeyCode(), a.Code-'a'+'A'; got != want || got < 'A' || got > 'Z' {
				t.Errorf("KeyCode = %q, want %q", got, want)
			}
			s := a.New()
			if got, want := reflect.TypeOf(s), stateTypes[a.Name]; got != want {
				t.Errorf("New() = %v, want %v", got, want)
			}
			if s == nil || types[reflect.TypeOf(s)] {
				t.Errorf("New() = %T: nil or the state of another algorithm", s)
			}
			if s2 := a.New(); s2 == s {
				t.Error("New returned the same state twice")
			}
			types[reflect.TypeOf(s)] = true
			names[a.Name], codes[a.Code] = true, true
			if got, ok := Lookup(a.Name); !ok || got.Code != a.Code {
				t.Errorf("Lookup(%q) = %q, %v", a.Name, got.Code, ok)
			}
			if got, ok := ByCode(a.Code); !ok || got.Name != a.Name {
				t.Errorf("ByCode(%q) = %q, %v", a.Code, got.Name, ok)
			}
		})
	}
	if got, want := len(names), 5; got != want {
		t.Errorf("%d algorithms, want %d", got, want)
	}
	if a, ok := Lookup(""); !ok || a.Name != Default().Name || Default().Name != Algos()[0].Name {
		t.Errorf(`Lookup("") = %q, %v; want the default, first in the table`, a.Name, ok)
	}
	if _, ok := Lookup("token-bucket"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
	if _, ok := ByCode(0); ok {
		t.Error("ByCode(0) succeeded")
	}
	all := Algos()
	all[0].Name = "changed"
	if Algos()[0].Name == "changed" {
		t.Error("Algos returned the table itself, not a copy")
	}
}

// TestLimitOf: the bucket length is part of the identity only for a
// bucketed algorithm, and an unknown name has Code 0.
func TestLimitOf(t *testing.T) {
	for _, a := range Algos() {
		l := LimitOf(a.Name, time.Minute, 6*time.Second)
		want := Limit{Code: a.Code, Window: 60_000_000, Bucket: 60_000_000}
		if a.Bucketed {
			want.Bucket = 6_000_000
		}
		if l != want {
			t.Errorf("LimitOf(%q) = %+v, want %+v", a.Name, l, want)
		}
		if got, ok := l.Algo(); !ok || got.Name != a.Name {
			t.Errorf("Algo() = %q, %v", got.Name, ok)
		}
	}
	if got := LimitOf("", time.Second, 0); got.Code != Default().Code {
		t.Errorf(`LimitOf("") has code %q, want the default's`, got.Code)
	}
	if got := LimitOf("nope", time.Second, 0); got.Code != 0 {
		t.Errorf("LimitOf of an unknown name has code %q, want 0", got.Code)
	}
}

// TestStateFields documents what every store's own key must hold: exactly
// these six things, no more (a Rate or Shadow flag in an identity gives one
// state two budgets when a reload changes them) and no fewer (a missing
// Group or bucket length merges states that must stay apart). memstore's
// entry key, redisstore's key encoder and edge's Async slots name state by
// this identity; their tests hold them to the storetest suite's isolation
// and sharing cases.
func TestStateFields(t *testing.T) {
	want := []string{"Zone", "Key", "Group", "Limit.Code", "Limit.Window", "Limit.Bucket"}
	var got []string
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, prefix string) {
		for f := range ty.Fields() {
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, prefix+f.Name+".")
				continue
			}
			got = append(got, prefix+f.Name)
		}
	}
	walk(reflect.TypeFor[State](), "")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("State's fields = %v, want %v", got, want)
	}
}
