package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenerTLS(t *testing.T) {
	const zone = "zones: [{name: z, limits: [1r/s]}]\n"
	_, err := Parse("s.yaml", []byte(zone+"listeners: [{addr: '127.0.0.1:0', tls: {cert_file: a.crt}}]\n"))
	if err == nil || !strings.Contains(err.Error(), "listeners[0].tls: needs both cert_file and key_file") {
		t.Errorf("tls without key_file: %v", err)
	}
	_, err = Parse("s.yaml", []byte(zone+"listeners: [{addr: '127.0.0.1:0', tls: {cert_file: a.crt, key_file: a.key, ca: x}}]\n"))
	if err == nil || !strings.Contains(err.Error(), `unknown field "ca"`) {
		t.Errorf("tls with an unknown field: %v", err)
	}
	_, err = Parse("s.yaml", []byte(zone+"listeners: [{addr: '127.0.0.1:0', tls: {cert_file: a.crt, key_file: a.key, client_dns_name: envoy}}]\n"))
	if err == nil || !strings.Contains(err.Error(), "client_dns_name: needs client_ca_file") {
		t.Errorf("client_dns_name without client_ca_file: %v", err)
	}
	// Load checks the files, relative to the file's directory, as
	// --check-config must.
	dir := t.TempDir()
	path := filepath.Join(dir, "s.yaml")
	os.WriteFile(filepath.Join(dir, "a.crt"), []byte("not PEM"), 0o600)
	os.WriteFile(filepath.Join(dir, "a.key"), []byte("not PEM"), 0o600)
	os.WriteFile(path, []byte(zone+"listeners: [{addr: '127.0.0.1:0', tls: {cert_file: a.crt, key_file: a.key}}]\n"), 0o600)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "listeners[0].tls: cert_file and key_file:") {
		t.Errorf("Load with a bad key pair: %v", err)
	}
	c, err := Parse("s.yaml", []byte(zone+"listeners: [{addr: '127.0.0.1:0', tls: {cert_file: /a.crt, key_file: /a.key, client_ca_file: /ca.pem}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := *c.Listeners[0].TLS; got != (TLS{CertFile: "/a.crt", KeyFile: "/a.key", ClientCAFile: "/ca.pem"}) {
		t.Errorf("TLS %+v", got)
	}
}
