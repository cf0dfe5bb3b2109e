package redisstore_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

var tenPerMinute = sluice.Limit{Rate: 10, Window: time.Minute}

// TestURLPasswordAndDB: redis://:password@host/db authenticates and keeps
// the state in that database.
func TestURLPasswordAndDB(t *testing.T) {
	srv := redistest.Standalone(t, "--requirepass", "s3cr@t")
	s := dialStore(t, "redis://:s3cr%40t@"+srv.Addr()+"/3", redisstore.Options{})
	spend(t, s, "k", tenPerMinute, 11, true)

	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, Password: "s3cr@t", SelectDB: 3, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := len(scanKeys(t, c, "sluice:*")); n != 1 {
		t.Fatalf("%d sluice keys in db 3, want 1", n)
	}

	_, err = redisstore.Dial("redis://:wrong@"+srv.Addr(), redisstore.Options{Timeout: testTimeout})
	if !errors.Is(err, sluice.ErrUnavailable) || containsSecret(err, "wrong") {
		t.Fatalf("wrong password: err = %v, want ErrUnavailable without the password", err)
	}
}

func containsSecret(err error, secret string) bool {
	return err != nil && strings.Contains(err.Error(), secret)
}

// TestURLTLS: rediss:// talks TLS, verifying the server's certificate.
func TestURLTLS(t *testing.T) {
	dir := t.TempDir()
	roots := writeCerts(t, dir)
	tlsPort := redistest.FreePort(t)
	redistest.Standalone(t, "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no")
	url := "rediss://localhost:" + strconv.Itoa(tlsPort)

	s := dialStore(t, url, redisstore.Options{TLSConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}})
	spend(t, s, "k", tenPerMinute, 11, true)

	// Without the CA, the self-signed server must be refused.
	if _, err := redisstore.Dial(url, redisstore.Options{Timeout: testTimeout}); err == nil {
		t.Fatal("rediss:// accepted a certificate from an unknown authority")
	}
}

// writeCerts writes a CA and a server certificate for localhost and
// 127.0.0.1 into dir, and returns the CA pool.
func writeCerts(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srv := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	for name, block := range map[string]*pem.Block{
		"ca.pem":     {Type: "CERTIFICATE", Bytes: caDER},
		"server.pem": {Type: "CERTIFICATE", Bytes: srvDER},
		"server.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	return roots
}

// countingScripter counts the script calls that reach Redis.
type countingScripter struct {
	redisstore.Scripter
	calls atomic.Int64
}

func (c *countingScripter) EvalSha(ctx context.Context, sha string, keys, args []string) ([]int64, error) {
	c.calls.Add(1)
	return c.Scripter.EvalSha(ctx, sha, keys, args)
}

func TestErrors(t *testing.T) {
	srv := redistest.Standalone(t)
	counter := &countingScripter{Scripter: redisstore.NewScripter(srv.Client())}
	s := scripterStore(t, counter, redisstore.Options{Timeout: 100 * time.Millisecond})
	var d sluice.Decision

	for _, c := range []sluice.Check{
		{},
		{Cost: 11, Hits: []sluice.Hit{{Key: "k", Limit: tenPerMinute}}},
		{Cost: 1, Hits: []sluice.Hit{{Key: "", Limit: tenPerMinute}}},
		{Cost: 1, Hits: []sluice.Hit{{Key: "k", Limit: sluice.Limit{Rate: 20_000, Window: time.Second, Algorithm: sluice.Log}}}},
	} {
		if err := s.Check(context.Background(), c, &d); !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("Check(%+v) = %v, want ErrInvalid", c, err)
		}
	}
	if n := counter.calls.Load(); n != 0 {
		t.Fatalf("%d script calls for invalid checks, want 0 (validate before any round trip)", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Check(ctx, hit("", "k", tenPerMinute), &d); !errors.Is(err, context.Canceled) || errors.Is(err, sluice.ErrUnavailable) {
		t.Errorf("Check with a canceled context = %v, want context.Canceled only", err)
	}

	srv.Kill()
	start := time.Now()
	err := s.Check(context.Background(), hit("", "k", tenPerMinute), &d)
	if !errors.Is(err, sluice.ErrUnavailable) {
		t.Fatalf("Check with Redis down = %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Check with Redis down took %v, want about the 100ms timeout", took)
	}
	if err := s.Reset(context.Background(), hit("", "k", tenPerMinute)); !errors.Is(err, sluice.ErrUnavailable) {
		t.Errorf("Reset with Redis down = %v, want ErrUnavailable", err)
	}
}

func TestOptionsErrors(t *testing.T) {
	srv := redistest.Standalone(t)
	for name, o := range map[string]redisstore.Options{
		"brace prefix": {Prefix: "a{b"},
		"tiny timeout": {Timeout: time.Microsecond},
		"negative":     {MaxBatch: -1},
	} {
		if _, err := redisstore.New(srv.Client(), o); !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
		if _, err := redisstore.Dial(srv.URL(), o); !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("%s: Dial = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := redisstore.New(nil, redisstore.Options{}); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("New(nil) = %v, want ErrInvalid", err)
	}
	if _, err := redisstore.NewWithScripter(nil, redisstore.Options{}); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("NewWithScripter(nil) = %v, want ErrInvalid", err)
	}
	if _, err := redisstore.Dial("redis://h:0", redisstore.Options{}); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("Dial(bad URL) = %v, want ErrInvalid", err)
	}
}

// TestSentinel runs the conformance suite through a Sentinel URL, then
// fails the master over and checks that the same Store decides again.
func TestSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel setup")
	}
	st := redistest.NewSentinel(t, 1)
	var n atomic.Int64
	t.Run("Conformance", func(t *testing.T) {
		runConformance(t, func(t *testing.T, now func() time.Time) sluice.Limiter {
			return dialStore(t, st.URL(), redisstore.Options{Now: now, Prefix: "sent" + strconv.FormatInt(n.Add(1), 10) + ":"})
		})
	})
	t.Run("Failover", func(t *testing.T) {
		s := dialStore(t, st.URL(), redisstore.Options{})
		spend(t, s, "k", tenPerMinute, 3, false)
		st.Failover()
		deadline := time.Now().Add(30 * time.Second)
		var d sluice.Decision
		for {
			err := s.Check(context.Background(), hit("", "k", tenPerMinute), &d)
			if err == nil {
				break
			}
			if !errors.Is(err, sluice.ErrUnavailable) || time.Now().After(deadline) {
				t.Fatalf("after failover: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
