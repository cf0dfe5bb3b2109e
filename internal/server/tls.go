package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/config"
)

// TLS on listeners: a listener with a tls section serves HTTPS (or gRPC
// over TLS) with the certificate of its files, read again whenever they
// change, so a renewed certificate or client CA bundle needs no restart
// (envoyproxy/ratelimit's gRPC server reloads its certificate the same
// way).

// certReloader hands out a listener's TLS configuration, reloading the
// files when their sizes or modification times change. The check runs at
// each new connection (two or three stat calls, against a handshake's
// milliseconds), so no timer is needed. A change that does not load is
// logged once and the previous certificate stays in use. Safe for
// concurrent use.
type certReloader struct {
	files      config.TLS
	nextProtos []string
	log        *slog.Logger

	mu    sync.Mutex
	stamp string
	cfg   *tls.Config
}

// newCertReloader loads the files of t; an error names the file at fault.
func newCertReloader(t config.TLS, nextProtos []string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{files: t, nextProtos: nextProtos, log: log}
	r.stamp = r.fileStamp()
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// config is the listener's tls.Config: every handshake takes the current
// files' configuration.
func (r *certReloader) config() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		NextProtos:         r.nextProtos,
		GetConfigForClient: r.forClient,
	}
}

func (r *certReloader) forClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.fileStamp(); st != r.stamp {
		r.stamp = st
		if err := r.load(); err != nil {
			r.log.Error("TLS files changed but do not load; serving the previous certificate", "cert_file", r.files.CertFile, "err", err)
		} else {
			r.log.Info("TLS files reloaded", "cert_file", r.files.CertFile)
		}
	}
	return r.cfg, nil
}

// load reads the files into r.cfg. The caller holds r.mu, or owns r.
func (r *certReloader) load() error {
	cert, pool, err := r.files.Load()
	if err != nil {
		return err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: r.nextProtos, Certificates: []tls.Certificate{cert}}
	if pool != nil {
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	if name := r.files.ClientDNSName; name != "" {
		// After the chain is verified: the leaf must also name the client.
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no client certificate")
			}
			return cs.PeerCertificates[0].VerifyHostname(name)
		}
	}
	r.cfg = cfg
	return nil
}

// fileStamp summarizes the sizes and modification times of the files; a
// file that cannot be read is "missing", so its return is a change too.
func (r *certReloader) fileStamp() string {
	var b []byte
	for _, name := range []string{r.files.CertFile, r.files.KeyFile, r.files.ClientCAFile} {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			b = append(b, "missing\x00"...)
			continue
		}
		b = fmt.Appendf(b, "%d\x00%d\x00", fi.Size(), fi.ModTime().UnixNano())
	}
	return string(b)
}

// httpsServer serves an *http.Server over TLS: Serve is ServeTLS with the
// certificate of its TLSConfig, HTTP/2 included.
type httpsServer struct{ *http.Server }

func (s httpsServer) Serve(ln net.Listener) error { return s.ServeTLS(ln, "", "") }

// httpErrorLog receives net/http's error lines for a listener and logs
// them as warnings, but for failed TLS handshakes (a plain-HTTP request,
// a scanner, a client that does not trust the certificate), which any
// client can cause once per connection: those are logged at most once per
// edge.DefaultLogInterval, with the number suppressed since, as every
// other refusal is.
type httpErrorLog struct{ s *Server }

func (l httpErrorLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if !strings.HasPrefix(msg, "http: TLS handshake error") {
		l.s.log.Warn(msg)
		return len(p), nil
	}
	if ok, suppressed := l.s.tlsLogs.allow(); ok {
		l.s.log.Warn("TLS handshake failed", "error", msg, "suppressed", suppressed)
	}
	return len(p), nil
}
