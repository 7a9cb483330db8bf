package waymark_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// Connection options that cannot work are an error when the client is made, and from a
// worker's Run (NewWorker returns no error) before it dials; the error says what is wrong and
// never shows the API key.
func TestConnectionOptionsThatCannotWork(t *testing.T) {
	certs := testCerts(t)
	ca := filepath.Join(certs, "ca.pem")
	const key = "wmk_abc_s3cr3t"
	for _, c := range []struct {
		name string
		env  map[string]string
		opts waymark.ClientOptions
		// Each must be in the error.
		want []string
	}{
		{"http with a CA", nil,
			waymark.ClientOptions{Server: "http://127.0.0.1:1", TLS: waymark.TLSOptions{CAFile: ca}},
			[]string{"http://", "TLS CA"}},
		{"http with a CA from the environment", map[string]string{"WAYMARK_TLS_CA": ca},
			waymark.ClientOptions{Server: "http://127.0.0.1:1"},
			[]string{"http://", "WAYMARK_TLS_CA"}},
		{"http from the environment with a client certificate", map[string]string{"WAYMARK_SERVER": "http://127.0.0.1:1"},
			waymark.ClientOptions{TLS: waymark.TLSOptions{CertFile: filepath.Join(certs, "client.pem"), KeyFile: filepath.Join(certs, "client.key")}},
			[]string{"http://", "TLS client certificate", "TLS client key"}},
		{"certificate without its key", nil,
			waymark.ClientOptions{Server: "127.0.0.1:1", TLS: waymark.TLSOptions{CertFile: filepath.Join(certs, "client.pem")}},
			[]string{"needs its key"}},
		{"key without its certificate", map[string]string{"WAYMARK_TLS_KEY": filepath.Join(certs, "client.key")},
			waymark.ClientOptions{Server: "127.0.0.1:1"},
			[]string{"needs its certificate"}},
		{"certificate and key that do not match", nil,
			waymark.ClientOptions{Server: "127.0.0.1:1", TLS: waymark.TLSOptions{CertFile: filepath.Join(certs, "client.pem"), KeyFile: filepath.Join(certs, "server.key")}},
			[]string{"client.pem", "server.key"}},
		{"missing CA file", nil,
			waymark.ClientOptions{Server: "127.0.0.1:1", TLS: waymark.TLSOptions{CAFile: filepath.Join(certs, "nowhere.pem")}},
			[]string{"nowhere.pem"}},
		{"CA that is not PEM", nil,
			waymark.ClientOptions{Server: "127.0.0.1:1", TLS: waymark.TLSOptions{CA: []byte("not a certificate")}},
			[]string{"no PEM certificate"}},
		{"CA as a file and as text", nil,
			waymark.ClientOptions{Server: "127.0.0.1:1", TLS: waymark.TLSOptions{CAFile: ca, CA: []byte("x")}},
			[]string{"both"}},
		{"unknown scheme", nil,
			waymark.ClientOptions{Server: "grpcs://127.0.0.1:1"},
			[]string{"grpcs://"}},
		{"API key with a space", nil,
			waymark.ClientOptions{Server: "127.0.0.1:1", APIKey: key + " " + key},
			[]string{"API key"}},
		{"API key with a newline inside, from the environment", map[string]string{"WAYMARK_API_KEY": key + "\n" + key},
			waymark.ClientOptions{Server: "127.0.0.1:1"},
			[]string{"API key"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearConnectionEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			check := func(who string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s: no error", who)
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q does not say %q", who, err, w)
					}
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("%s: the error shows the API key", who)
				}
			}
			client, err := waymark.NewClientWithOptions(c.opts)
			if client != nil {
				_ = client.Close()
			}
			check("client", err)
			w := waymark.NewWorker(waymark.WorkerOptions{Server: c.opts.Server, TLS: c.opts.TLS, APIKey: c.opts.APIKey, Logger: testLogger(t)})
			check("worker", w.Run(context.Background()))
		})
	}
}

// Options that work: any TLS option makes an address without a scheme TLS, and https:// needs
// none (the system's roots); a plaintext address takes a key.
func TestConnectionOptionsThatWork(t *testing.T) {
	certs := testCerts(t)
	for _, opts := range []waymark.ClientOptions{
		{Server: "127.0.0.1:1"},
		{Server: "http://127.0.0.1:1/", APIKey: "wmk_a_b", Namespace: "default"},
		{Server: "https://localhost:1"},
		{Server: "HTTPS://localhost:1", TLS: waymark.TLSOptions{CAFile: filepath.Join(certs, "ca.pem")}},
		{Server: "localhost:1", TLS: waymark.TLSOptions{
			CAFile: filepath.Join(certs, "ca.pem"), CertFile: filepath.Join(certs, "client.pem"), KeyFile: filepath.Join(certs, "client.key"),
		}},
	} {
		clearConnectionEnv(t)
		c, err := waymark.NewClientWithOptions(opts)
		if err != nil {
			t.Errorf("%s: %v", opts.Server, err)
			continue
		}
		_ = c.Close()
	}
}
