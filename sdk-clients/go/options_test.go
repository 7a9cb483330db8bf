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

// An API key over plaintext (http://, or no scheme and no TLS option) to a host that is not
// loopback would cross the network unencrypted: an error from NewClientWithOptions and from a
// worker's Run, unless Insecure or WAYMARK_INSECURE=1 says it is meant. Loopback, TLS, and no
// key at all are allowed as before.
func TestAPIKeyOverPlaintextToARemoteHostNeedsInsecure(t *testing.T) {
	const key = "wmk_abc_s3cr3t"
	// The error from the client and from the worker's Run (nil when both accept the options).
	// The worker's context is cancelled: with options that work, Run returns nil at once.
	try := func(t *testing.T, opts waymark.ClientOptions) error {
		t.Helper()
		c, cerr := waymark.NewClientWithOptions(opts)
		if c != nil {
			_ = c.Close()
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		w := waymark.NewWorker(waymark.WorkerOptions{Server: opts.Server, TLS: opts.TLS, APIKey: opts.APIKey,
			Insecure: opts.Insecure, Logger: testLogger(t)})
		werr := w.Run(ctx)
		if (cerr == nil) != (werr == nil) {
			t.Fatalf("%s: the client says %v, the worker %v", opts.Server, cerr, werr)
		}
		return cerr
	}

	for _, server := range []string{"http://waymark.invalid:7450", "waymark.invalid:7450", "http://10.0.0.1:7450", "http://[2001:db8::1]:7450"} {
		t.Run("refused "+server, func(t *testing.T) {
			clearConnectionEnv(t)
			err := try(t, waymark.ClientOptions{Server: server, APIKey: key})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range []string{"unencrypted", "https://", "Insecure", "WAYMARK_INSECURE=1"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Error("the error shows the API key")
			}
		})
	}
	t.Run("refused from the environment", func(t *testing.T) {
		clearConnectionEnv(t)
		t.Setenv("WAYMARK_SERVER", "http://waymark.invalid:7450")
		t.Setenv("WAYMARK_API_KEY", key)
		t.Setenv("WAYMARK_INSECURE", "0")
		if err := try(t, waymark.ClientOptions{}); err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Fatalf("want an error without the key, got %v", err)
		}
	})

	for _, c := range []struct {
		name string
		env  map[string]string
		opts waymark.ClientOptions
	}{
		{"loopback 127.0.0.1", nil, waymark.ClientOptions{Server: "http://127.0.0.1:7450", APIKey: key}},
		{"loopback 127.x.x.x without a scheme", nil, waymark.ClientOptions{Server: "127.3.2.1:7450", APIKey: key}},
		{"loopback localhost", nil, waymark.ClientOptions{Server: "http://LocalHost:7450", APIKey: key}},
		{"loopback [::1]", nil, waymark.ClientOptions{Server: "http://[::1]:7450", APIKey: key}},
		{"https to a remote host", nil, waymark.ClientOptions{Server: "https://waymark.invalid:7450", APIKey: key}},
		{"no key", nil, waymark.ClientOptions{Server: "http://waymark.invalid:7450"}},
		{"Insecure", nil, waymark.ClientOptions{Server: "http://waymark.invalid:7450", APIKey: key, Insecure: true}},
		{"WAYMARK_INSECURE=1", map[string]string{"WAYMARK_INSECURE": "1"},
			waymark.ClientOptions{Server: "http://waymark.invalid:7450", APIKey: key}},
		{"WAYMARK_INSECURE=1 with the key and address from the environment",
			map[string]string{"WAYMARK_INSECURE": "1", "WAYMARK_SERVER": "waymark.invalid:7450", "WAYMARK_API_KEY": key},
			waymark.ClientOptions{}},
	} {
		t.Run("allowed "+c.name, func(t *testing.T) {
			clearConnectionEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if err := try(t, c.opts); err != nil {
				t.Fatal(err)
			}
		})
	}
}
