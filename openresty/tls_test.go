package openresty

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// testCerts writes a CA and a server certificate it signed for
// "redis.test" and 127.0.0.1 into dir: ca.pem, server.pem, server.key.
func testCerts(t *testing.T, dir string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"redis.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"ca.pem":     {Type: "CERTIFICATE", Bytes: caDER},
		"server.pem": {Type: "CERTIFICATE", Bytes: srvDER},
		"server.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTLS: the module reaches a real redis-server on its TLS port
// (rediss://), verifying the server's certificate against the CA of
// lua_ssl_trusted_certificate and the name server_name, and shares one
// exact limit with a Go store on the plain port of the same server. A
// certificate for another name, or any without lua_ssl_trusted_certificate,
// is refused unless ssl_verify is false.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	testCerts(t, dir)
	tlsPort := port(t)
	srv := redistest.Standalone(t, "--tls-port", tlsPort,
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no")
	n := startNginx(t, 2, harnessConf(t, "        lua_ssl_trusted_certificate "+filepath.Join(dir, "ca.pem")+";\n        lua_ssl_verify_depth 2;\n"))
	url := "rediss://127.0.0.1:" + tlsPort
	ctx := context.Background()
	const rate = 10
	check := func(key string) sluice.Check {
		return sluice.Check{Hits: []sluice.Hit{{Zone: "z", Key: key, Limit: sluice.Limit{Rate: rate, Window: time.Hour}}}, Cost: 1}
	}

	t.Run("verified", func(t *testing.T) {
		lua := &luaLimiter{url: n.url, redis: url, prefix: "tls:", serverName: "redis.test", verify: true, client: newHTTPClient()}
		store, err := redisstore.Dial(srv.URL(), redisstore.Options{Prefix: "tls:", Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		admitted := 0
		for i := range 2 * rate {
			var d sluice.Decision
			var l sluice.Limiter = lua
			if i%2 == 1 {
				l = store
			}
			if err := l.Check(ctx, check("shared"), &d); err != nil {
				t.Fatalf("check %d: %v", i, err)
			}
			if d.Allowed {
				admitted++
			}
		}
		if admitted != rate {
			t.Errorf("nginx over TLS and Go over TCP admitted %d in all, want %d", admitted, rate)
		}
	})

	t.Run("wrong name", func(t *testing.T) {
		lua := &luaLimiter{url: n.url, redis: url, prefix: "tls:", serverName: "other.test", verify: true, client: newHTTPClient()}
		var d sluice.Decision
		err := lua.Check(ctx, check("wrong"), &d)
		if err == nil || !strings.Contains(err.Error(), "TLS") {
			t.Errorf("a certificate for redis.test checked as other.test: err %v, want a TLS error", err)
		}
	})

	t.Run("no trusted certificates", func(t *testing.T) {
		bare := startNginx(t, 1, harnessConf(t, ""))
		lua := &luaLimiter{url: bare.url, redis: url, prefix: "tls:", serverName: "redis.test", verify: true, client: newHTTPClient()}
		var d sluice.Decision
		err := lua.Check(ctx, check("bare"), &d)
		if err == nil || !strings.Contains(err.Error(), "TLS") {
			t.Errorf("nginx without lua_ssl_trusted_certificate: err %v, want a TLS error", err)
		}
	})

	t.Run("unverified", func(t *testing.T) {
		lua := &luaLimiter{url: n.url, redis: url, prefix: "tls:", serverName: "other.test", verify: false, client: newHTTPClient()}
		var d sluice.Decision
		if err := lua.Check(ctx, check("unverified"), &d); err != nil || !d.Allowed {
			t.Errorf("ssl_verify false: allowed %v, err %v; want allowed", d.Allowed, err)
		}
	})
}

// TestTLSSentinel: with rediss-sentinel://, the module asks a real
// redis-sentinel on its TLS port for the master and reaches the master
// on its TLS port, both verified as redis.test; the limit is exact and
// the master holds it.
func TestTLSSentinel(t *testing.T) {
	dir := t.TempDir()
	testCerts(t, dir)
	tlsArgs := []string{"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no"}
	masterTLS := port(t)
	master := redistest.Standalone(t, append([]string{"--tls-port", masterTLS, "--tls-replication", "yes"}, tlsArgs...)...)
	sentinelPlain, sentinelTLS := port(t), port(t)
	conf := filepath.Join(dir, "sentinel.conf")
	// The same TLS options as the master's, as configuration lines.
	var tlsConf strings.Builder
	for i := 0; i < len(tlsArgs); i += 2 {
		tlsConf.WriteString(strings.TrimPrefix(tlsArgs[i], "--") + " " + tlsArgs[i+1] + "\n")
	}
	text := "port " + sentinelPlain + "\nbind 127.0.0.1\nprotected-mode no\ndir " + dir + "\n" +
		"tls-port " + sentinelTLS + "\ntls-replication yes\n" + tlsConf.String() +
		"sentinel monitor " + redistest.MasterName + " 127.0.0.1 " + masterTLS + " 1\n"
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sentinel := exec.CommandContext(ctx, redistest.Binary(t, "redis-sentinel"), conf)
	sentinel.Stdout, sentinel.Stderr = os.Stderr, os.Stderr
	if err := sentinel.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sentinel.Process.Kill(); sentinel.Wait() })
	waitPong(t, "127.0.0.1:"+sentinelPlain)

	n := startNginx(t, 2, harnessConf(t, "        lua_ssl_trusted_certificate "+filepath.Join(dir, "ca.pem")+";\n"))
	lua := &luaLimiter{url: n.url, redis: "rediss-sentinel://127.0.0.1:" + sentinelTLS + "/" + redistest.MasterName,
		prefix: "tlss:", serverName: "redis.test", verify: true, client: newHTTPClient()}
	const rate = 10
	c := sluice.Check{Hits: []sluice.Hit{{Zone: "z", Key: "k", Limit: sluice.Limit{Rate: rate, Window: time.Hour}}}, Cost: 1}
	admitted := 0
	for range rate + 5 {
		var d sluice.Decision
		if err := lua.Check(ctx, c, &d); err != nil {
			t.Fatalf("check over rediss-sentinel: %v", err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != rate {
		t.Errorf("admitted %d, want %d", admitted, rate)
	}
	if n, err := master.Do("EXISTS", "tlss:z{k}:W3600000000").AsInt64(); err != nil || n != 1 {
		t.Errorf("the key on the master: EXISTS %d (%v), want 1", n, err)
	}
}

// port returns a free port of 127.0.0.1 for a Redis or Sentinel
// listener, held from other processes' Redis helpers for the test's life.
func port(t *testing.T) string {
	t.Helper()
	return strconv.Itoa(redistest.FreePort(t))
}

// waitPong waits (up to 10 s) until the server at addr answers PING.
func waitPong(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 7)
			_, err = c.Write([]byte("PING\r\n"))
			if err == nil {
				_, err = io.ReadFull(c, buf)
			}
			c.Close()
			if err == nil && string(buf) == "+PONG\r\n" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer PING after 10 s", addr)
		}
		<-time.After(50 * time.Millisecond) // a process starting: nothing to wait on but the port
	}
}
