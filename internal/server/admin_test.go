package server

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAdminTokenFileNotReadRefused(t *testing.T) {
	cfg := parseConfig(t, "zones: [{name: a, limits: 1r/s}]\nadmin: {token_file: /nonexistent}\n")
	if _, err := New(t.Context(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "was not read") {
		t.Errorf("New with an unread token file: %v, want an error", err)
	}
}

// TestAdminTokenReload: a reload reads the token file again, so a token
// is rotated without a restart.
func TestAdminTokenReload(t *testing.T) {
	dir := t.TempDir()
	path, tokenPath := filepath.Join(dir, "sluice.yaml"), filepath.Join(dir, "token")
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(tokenPath, "old-token-0123456789\n")
	write(path, "listeners: [{addr: '127.0.0.1:0'}]\nzones: [{name: a, limits: 1r/s}]\nadmin: {token_file: token}\n")
	ts := start(t, loadConfig(t, path), Options{ConfigPath: path, WatchInterval: -1})
	reset := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, ts.api+"/v1/reset", strings.NewReader(`{"zone":"a","key":"k"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := reset("old-token-0123456789"); got != http.StatusNoContent {
		t.Fatalf("old token before the reload: %d, want 204", got)
	}
	write(tokenPath, "new-token-0123456789\n")
	if err := ts.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := reset("old-token-0123456789"); got != http.StatusUnauthorized {
		t.Errorf("old token after the reload: %d, want 401", got)
	}
	logs := ts.logs.String()
	if !strings.Contains(logs, "admin endpoint refused") || strings.Contains(logs, "token-0123456789") {
		t.Errorf("a refused admin call: want one warning without the token, got:\n%s", logs)
	}
	if got := reset("new-token-0123456789"); got != http.StatusNoContent {
		t.Errorf("new token after the reload: %d, want 204", got)
	}
}

func TestBearerMatches(t *testing.T) {
	const token = "0123456789abcdef"
	for _, tt := range []struct {
		header string
		want   bool
	}{
		{"Bearer " + token, true},
		{"bearer " + token, true},
		{"Bearer  " + token + " ", true},
		{"Bearer " + token + "0", false},
		{"Bearer " + token[:15], false},
		{token, false},
		{"Basic " + token, false},
		{"", false},
		{"Bearer ", false},
	} {
		if got := bearerMatches(tt.header, token); got != tt.want {
			t.Errorf("bearerMatches(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
}
