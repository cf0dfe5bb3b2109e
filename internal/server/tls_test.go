package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/config"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// serials hands out distinct serial numbers.
var serials atomic.Int64

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(100 + serials.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf certificate for 127.0.0.1 (server) or a client,
// returning its serial and PEM certificate and key.
func (ca *testCA) issue(t *testing.T, client bool, dnsNames ...string) (serial int64, certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial = 100 + serials.Add(1)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "sluice test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses, tmpl.DNSNames = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, dnsNames
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return serial, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// replace writes data to name as a deployment renews a file: a new file
// renamed over the old one, with a modification time later than any
// before it (file times may be coarser than the test's pace).
func replace(t *testing.T, name string, data []byte, mod time.Time) {
	t.Helper()
	tmp := name + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, mod, mod); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

func addrOf(t *testing.T, ts *testServer, role config.Role) string {
	t.Helper()
	for _, a := range ts.Addrs() {
		if a.Role == role {
			return a.Addr
		}
	}
	t.Fatalf("no %s listener", role)
	return ""
}

// TestTLSListenerReloadsCertificate: an api listener with a tls section
// serves HTTPS with the file's certificate, refuses plain HTTP, and serves
// a renewed certificate to the next connection without a restart.
func TestTLSListenerReloadsCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "sluice test CA")
	serial1, cert1, key1 := ca.issue(t, false)
	start0 := time.Now().Add(-time.Minute)
	replace(t, filepath.Join(dir, "tls.crt"), cert1, start0)
	replace(t, filepath.Join(dir, "tls.key"), key1, start0)
	path := filepath.Join(dir, "sluice.yaml")
	os.WriteFile(path, []byte("listeners: [{addr: '127.0.0.1:0', tls: {cert_file: tls.crt, key_file: tls.key}}]\nzones: [{name: a, limits: 1r/s}]\n"), 0o600)
	ts := start(t, loadConfig(t, path), Options{})
	addr := addrOf(t, ts, config.API)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.pem)
	httpsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}}
	served := func() int64 {
		t.Helper()
		resp, err := httpsClient.Get("https://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("GET https://%s/healthz: %v", addr, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /healthz over TLS: %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if got := served(); got != serial1 {
		t.Fatalf("served certificate %d, want %d", got, serial1)
	}
	if resp, err := client.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP on a TLS listener: 200, want a refusal")
		}
	}

	serial2, cert2, key2 := ca.issue(t, false)
	replace(t, filepath.Join(dir, "tls.key"), key2, start0.Add(time.Second))
	replace(t, filepath.Join(dir, "tls.crt"), cert2, start0.Add(time.Second))
	if got := served(); got != serial2 {
		t.Fatalf("after renewal: served certificate %d, want the new one, %d", got, serial2)
	}
	// A broken renewal keeps the last good certificate, and says so.
	replace(t, filepath.Join(dir, "tls.crt"), []byte("not a certificate"), start0.Add(2*time.Second))
	if got := served(); got != serial2 {
		t.Errorf("after a broken renewal: served certificate %d, want the last good one, %d", got, serial2)
	}
	if !strings.Contains(ts.logs.String(), "do not load") {
		t.Errorf("broken renewal not logged:\n%s", ts.logs.String())
	}
}

// TestTLSGRPCListenerMutualTLS: a grpc listener with client_ca_file serves
// gRPC over TLS to clients whose certificate that CA signed, refuses
// others, and takes a renewed client CA bundle without a restart.
func TestTLSGRPCListenerMutualTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA, otherCA := newCA(t, "server CA"), newCA(t, "client CA"), newCA(t, "other CA")
	_, cert, key := serverCA.issue(t, false)
	t0 := time.Now().Add(-time.Minute)
	replace(t, filepath.Join(dir, "tls.crt"), cert, t0)
	replace(t, filepath.Join(dir, "tls.key"), key, t0)
	replace(t, filepath.Join(dir, "clients.pem"), clientCA.pem, t0)
	rules := filepath.Join(dir, "rules")
	os.Mkdir(rules, 0o700)
	os.WriteFile(filepath.Join(rules, "d.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n"), 0o600)
	path := filepath.Join(dir, "sluice.yaml")
	os.WriteFile(path, []byte("listeners:\n  - {addr: '127.0.0.1:0'}\n  - {addr: '127.0.0.1:0', serve: grpc, tls: {cert_file: tls.crt, key_file: tls.key, client_ca_file: clients.pem}}\nrls: {config_dir: "+rules+"}\n"), 0o600)
	ts := start(t, loadConfig(t, path), Options{})
	addr := addrOf(t, ts, config.GRPC)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(serverCA.pem)
	health := func(ca *testCA, dnsNames ...string) error {
		t.Helper()
		tc := &tls.Config{RootCAs: roots}
		if ca != nil {
			_, c, k := ca.issue(t, true, dnsNames...)
			pair, err := tls.X509KeyPair(c, k)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var p peer.Peer
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
		if err == nil && resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %v, want SERVING", resp.Status)
		}
		if err == nil {
			if _, ok := p.AuthInfo.(credentials.TLSInfo); !ok {
				t.Errorf("peer auth %T, want TLS", p.AuthInfo)
			}
		}
		return err
	}
	if err := health(clientCA); err != nil {
		t.Fatalf("client certificate of the client CA: %v", err)
	}
	if err := health(nil); err == nil {
		t.Error("no client certificate: served, want refused")
	}
	if err := health(otherCA); err == nil {
		t.Error("client certificate of another CA: served, want refused")
	}
	// The client CA bundle is renewed: the other CA replaces the first.
	replace(t, filepath.Join(dir, "clients.pem"), otherCA.pem, t0.Add(time.Second))
	if err := health(otherCA); err != nil {
		t.Errorf("after the CA bundle changed, a certificate of the new CA: %v", err)
	}
	if err := health(clientCA); err == nil {
		t.Error("after the CA bundle changed, a certificate of the old CA: served, want refused")
	}
}

// TestTLSClientDNSName: with client_dns_name (envoyproxy/ratelimit's
// GRPC_CLIENT_TLS_SAN), a client certificate the CA signed must also carry
// that DNS name.
func TestTLSClientDNSName(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA := newCA(t, "server CA"), newCA(t, "client CA")
	_, cert, key := serverCA.issue(t, false)
	for name, data := range map[string][]byte{"tls.crt": cert, "tls.key": key, "clients.pem": clientCA.pem} {
		os.WriteFile(filepath.Join(dir, name), data, 0o600)
	}
	path := filepath.Join(dir, "sluice.yaml")
	os.WriteFile(path, []byte("listeners: [{addr: '127.0.0.1:0', tls: {cert_file: tls.crt, key_file: tls.key, client_ca_file: clients.pem, client_dns_name: envoy.mesh.internal}}]\nzones: [{name: a, limits: 1r/s}]\n"), 0o600)
	ts := start(t, loadConfig(t, path), Options{})
	addr := addrOf(t, ts, config.API)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(serverCA.pem)
	get := func(dnsNames ...string) error {
		t.Helper()
		_, c, k := clientCA.issue(t, true, dnsNames...)
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}}}
		resp, err := hc.Get("https://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get("envoy.mesh.internal"); err != nil {
		t.Errorf("client certificate for envoy.mesh.internal: %v", err)
	}
	if err := get("other.mesh.internal"); err == nil {
		t.Error("client certificate for another name: served, want refused")
	}
}

// TestTLSHandshakeErrorsThrottled: 200 plain-HTTP requests to a TLS
// listener, each a failed handshake, are logged as one warning per
// edge.DefaultLogInterval (the later ones carry the number suppressed),
// not one per connection.
func TestTLSHandshakeErrorsThrottled(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "sluice test CA")
	_, cert, key := ca.issue(t, false)
	os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o600)
	os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600)
	path := filepath.Join(dir, "sluice.yaml")
	os.WriteFile(path, []byte("listeners: [{addr: '127.0.0.1:0', tls: {cert_file: tls.crt, key_file: tls.key}}]\nzones: [{name: a, limits: 1r/s}]\n"), 0o600)
	ts := start(t, loadConfig(t, path), Options{})
	addr := addrOf(t, ts, config.API)
	plain := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	began := time.Now()
	for range 200 {
		if resp, err := plain.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
		}
	}
	count := func() int { return strings.Count(ts.logs.String(), "TLS handshake failed") }
	for deadline := time.Now().Add(10 * time.Second); count() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // the server logs after it answered
	}
	elapsed := time.Since(began)
	if n, most := count(), 1+int(elapsed/edge.DefaultLogInterval); n < 1 || n > most {
		t.Errorf("%d TLS handshake warnings for 200 failed handshakes in %v, want 1 to %d; logs:\n%s", n, elapsed, most, ts.logs.String())
	}
	if n := strings.Count(ts.logs.String(), "TLS handshake error"); n != count() {
		t.Errorf("%d lines name a TLS handshake error, %d of them throttled warnings", n, count())
	}
}
