package redisstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

func TestCheckURL(t *testing.T) {
	for _, ok := range []string{"redis://h:6379", "rediss://u:p@h:1/2", "redis-sentinel://a:1,b:2/mymaster/1", "redis-cluster://a:1,b:2"} {
		if err := CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"redis://h:99999", "redis://:hunter2@h:1/x", "redis-sentinel://a:1", "redis-cluster://a:1/3", "mysql://h:1"} {
		err := CheckURL(bad)
		if !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("CheckURL(%q) = %v, want an error wrapping ErrInvalid", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("CheckURL(%q) = %v: shows the password", bad, err)
		}
	}
}
