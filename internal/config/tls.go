package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v4"
)

// TLS makes a listener serve TLS. The server reads the files again when
// they change (checked at every new connection), so a renewed certificate
// or client CA bundle is served without a restart.
type TLS struct {
	// CertFile is the PEM certificate chain, leaf first. Required. Load
	// makes a relative name relative to the configuration file's
	// directory.
	CertFile string
	// KeyFile is the PEM private key of the certificate. Required.
	KeyFile string
	// ClientCAFile, when set, is a PEM bundle of the CAs that sign client
	// certificates: every client must then present a certificate one of
	// them signed (mutual TLS). Default: none, clients are not asked for a
	// certificate.
	ClientCAFile string
	// ClientDNSName, when set, is a DNS name every client certificate
	// must carry (a DNS subject alternative name, wildcards as in server
	// names), as envoyproxy/ratelimit's GRPC_CLIENT_TLS_SAN. Needs
	// ClientCAFile. Default: none, any certificate the client CAs signed.
	ClientDNSName string
}

// Load reads and checks the files: the key pair, and the client CA bundle
// when set. It does what a server does at every change of the files.
func (t *TLS) Load() (tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("cert_file and key_file: %w", err)
	}
	if t.ClientCAFile == "" {
		return cert, nil, nil
	}
	pem, err := os.ReadFile(t.ClientCAFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("client_ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return tls.Certificate{}, nil, errors.New("client_ca_file: " + t.ClientCAFile + ": no PEM certificate in it")
	}
	return cert, pool, nil
}

func (w *walker) tls(n *yaml.Node, path string) *TLS {
	t := &TLS{}
	w.fields(n, path, map[string]func(*yaml.Node, string){
		"cert_file":       func(v *yaml.Node, p string) { t.CertFile = w.str(v, p) },
		"key_file":        func(v *yaml.Node, p string) { t.KeyFile = w.str(v, p) },
		"client_ca_file":  func(v *yaml.Node, p string) { t.ClientCAFile = w.str(v, p) },
		"client_dns_name": func(v *yaml.Node, p string) { t.ClientDNSName = w.str(v, p) },
	})
	if !w.failed(path) && (t.CertFile == "" || t.KeyFile == "") {
		w.add(w.line(path), path, "needs both cert_file and key_file")
	}
	if t.ClientDNSName != "" && t.ClientCAFile == "" {
		w.add(w.line(path+".client_dns_name"), path+".client_dns_name", "needs client_ca_file: without it no client certificate is asked for")
	}
	return t
}

// loadTLS makes the listeners' TLS file names relative to dir absolute
// and checks that the files load, so that --check-config finds what the
// server would refuse.
func (w *walker) loadTLS(c *Config, dir string) {
	for i := range c.Listeners {
		t := c.Listeners[i].TLS
		if t == nil || t.CertFile == "" || t.KeyFile == "" {
			continue
		}
		for _, name := range []*string{&t.CertFile, &t.KeyFile, &t.ClientCAFile} {
			if *name != "" && !filepath.IsAbs(*name) {
				*name = filepath.Join(dir, *name)
			}
		}
		p := index("listeners", i) + ".tls"
		if _, _, err := t.Load(); err != nil {
			w.add(w.line(p), p, "%v", err)
		}
	}
}
