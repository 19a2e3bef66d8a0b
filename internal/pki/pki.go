// Package pki makes the certificates of a srchain deployment's mutual TLS
// (issue 12): a CA, a server certificate for etcd, a client certificate
// for the controller (common name "root", etcd's administrator) and one
// per node (common name = node name; etcd takes it as the user, whose role
// reaches only /srchain/v1/nodes/<node>/, internal/store). It is meant
// for labs and first deployments; an operator with a PKI of their own
// gives srchain files with the same names.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// File names in a PKI directory.
const (
	CAFile     = "ca.pem"
	ServerName = "server" // server.pem, server-key.pem
	// RootName is the controller's client certificate: etcd's root user.
	RootName = "root"
)

// CertFile and KeyFile name the certificate and key of name in dir.
func CertFile(dir, name string) string { return filepath.Join(dir, name+".pem") }

// KeyFile names the private key of name in dir.
func KeyFile(dir, name string) string { return filepath.Join(dir, name+"-key.pem") }

// Validity of the generated certificates.
const Validity = 5 * 365 * 24 * time.Hour

// ErrExists: a file Generate would write is there already (it never
// overwrites a key).
var ErrExists = errors.New("exists")

var nodeRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// Generate writes a new CA, the server certificate (valid for localhost,
// 127.0.0.1, ::1 and hosts), the root client certificate and one client
// certificate per node into dir. Keys are ECDSA P-256 from crypto/rand,
// written 0600; nothing existing is overwritten (ErrExists).
func Generate(dir string, nodes, hosts []string) error {
	for _, n := range append([]string{RootName}, nodes...) {
		if !nodeRE.MatchString(n) || n == ServerName || n == "ca" {
			return fmt.Errorf("generate certificates: bad name %q", n)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("generate certificates: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate ca key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "srchain ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("create ca certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("parse ca certificate: %w", err)
	}
	if err := writePEM(filepath.Join(dir, CAFile), "CERTIFICATE", caDER, 0o644); err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "ca-key.pem"), caKey); err != nil {
		return err
	}
	issue := func(name string, server bool) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("generate key of %s: %w", name, err)
		}
		t := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if server {
			t.ExtKeyUsage = append(t.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
			t.DNSNames = []string{"localhost"}
			t.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
			for _, h := range hosts {
				if ip := net.ParseIP(h); ip != nil {
					t.IPAddresses = append(t.IPAddresses, ip)
				} else {
					t.DNSNames = append(t.DNSNames, h)
				}
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, t, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("create certificate of %s: %w", name, err)
		}
		if err := writePEM(CertFile(dir, name), "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
		return writeKey(KeyFile(dir, name), key)
	}
	if err := issue(ServerName, true); err != nil {
		return err
	}
	for _, n := range append([]string{RootName}, nodes...) {
		if err := issue(n, false); err != nil {
			return err
		}
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		// crypto/rand does not fail on Linux (getrandom); a fixed serial
		// would still be a valid certificate.
		return big.NewInt(1)
	}
	return n
}

func writeKey(path string, k *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return fmt.Errorf("encode key %s: %w", path, err)
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("write %s: %w", path, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := pem.Encode(f, &pem.Block{Type: typ, Bytes: der}); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
