package waymark

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// TLSOptions make the connection to the server TLS. Each PEM may be given as a file or as its
// text, not both; a field left empty falls back to its environment variable (WAYMARK_TLS_CA,
// WAYMARK_TLS_CERT, WAYMARK_TLS_KEY: paths). Setting any of them, here or in the environment,
// makes an address without a scheme TLS; with an https:// address and no CA, the system's
// roots are trusted.
type TLSOptions struct {
	// CAFile is a PEM file of the certificate authorities to trust for the server's
	// certificate (instead of the system's); CA is the same as PEM text.
	CAFile string
	CA     []byte
	// CertFile and KeyFile are this program's certificate and its private key (PEM), for a
	// server that requires mutual TLS (`waymark server --tls-client-ca`); Cert and Key are
	// the same as PEM text. Both or neither.
	CertFile, KeyFile string
	Cert, Key         []byte
}

// The environment variables read when an option is not set.
const (
	envServer    = "WAYMARK_SERVER"
	envTLSCA     = "WAYMARK_TLS_CA"
	envTLSCert   = "WAYMARK_TLS_CERT"
	envTLSKey    = "WAYMARK_TLS_KEY"
	envAPIKey    = "WAYMARK_API_KEY"
	envNamespace = "WAYMARK_NAMESPACE"
	envInsecure  = "WAYMARK_INSECURE"
)

// The metadata every call carries when set.
const (
	authorizationHeader = "authorization"
	namespaceHeader     = "waymark-namespace"
)

// connOptions is how to reach the server, as a Client's and a Worker's options give it: the
// one place both turn into a connection.
type connOptions struct {
	server    string
	tls       TLSOptions
	apiKey    string
	namespace string
	// insecure allows the API key over plaintext to a host that is not loopback.
	insecure bool
	// Added after the SDK's own, so they override them.
	dial []grpc.DialOption
}

// endpoint is a connOptions resolved: environment fallbacks applied, files read, everything
// checked. Made once, when the client or worker is made; dial may be called again (a worker
// dials on each Run).
type endpoint struct {
	target string
	opts   []grpc.DialOption
}

// resolve applies the environment fallbacks and checks the options, reading the PEM files.
// Its errors never include the API key. An API key over plaintext to a host that is not
// loopback is an error unless insecure (or WAYMARK_INSECURE) says it is meant: the key would
// cross the network unencrypted.
func (o connOptions) resolve() (*endpoint, error) {
	server := strings.TrimSpace(o.server)
	if server == "" {
		server = DefaultServer()
	}
	scheme, hostport := splitScheme(server)
	if hostport == "" {
		return nil, fmt.Errorf("waymark: server address %q has no host", server)
	}

	t := o.tls
	// Which options are set, and where they came from, for the errors.
	var set []string
	note := func(field string, ok bool) {
		if ok {
			set = append(set, field)
		}
	}
	fallback := func(path *string, pem []byte, field, env string) {
		if *path == "" && len(pem) == 0 {
			if v := strings.TrimSpace(os.Getenv(env)); v != "" {
				*path = v
				set = append(set, env)
				return
			}
		}
		note(field, *path != "" || len(pem) > 0)
	}
	fallback(&t.CAFile, t.CA, "TLS CA", envTLSCA)
	fallback(&t.CertFile, t.Cert, "TLS client certificate", envTLSCert)
	fallback(&t.KeyFile, t.Key, "TLS client key", envTLSKey)

	apiKey := strings.TrimSpace(o.apiKey)
	if apiKey == "" {
		apiKey = strings.TrimSpace(os.Getenv(envAPIKey))
	}
	namespace := strings.TrimSpace(o.namespace)
	if namespace == "" {
		namespace = strings.TrimSpace(os.Getenv(envNamespace))
	}
	if !headerSafe(apiKey) {
		// Not quoted: it is a secret.
		return nil, errors.New("waymark: the API key holds characters a gRPC header cannot carry (spaces or control characters)")
	}
	if !headerSafe(namespace) {
		return nil, fmt.Errorf("waymark: namespace %q holds characters a gRPC header cannot carry", namespace)
	}

	useTLS := len(set) > 0
	switch scheme {
	case "http":
		if useTLS {
			return nil, fmt.Errorf("waymark: server address %q is plaintext (http://) but TLS options are set (%s): use https:// or no scheme",
				server, strings.Join(set, ", "))
		}
	case "https":
		useTLS = true
	case "":
	default:
		return nil, fmt.Errorf("waymark: server address %q: unknown scheme %s:// (http:// or https://)", server, scheme)
	}

	if apiKey != "" && !useTLS && !isLoopback(hostport) && !o.insecure && !envTrue(envInsecure) {
		return nil, fmt.Errorf("waymark: an API key is set but server address %q is plaintext (http://, or no scheme and no TLS option) "+
			"to a host that is not loopback, so the key would be sent unencrypted: use https:// (TLS), "+
			"or set Insecure in the options (or %s=1) to send it anyway", server, envInsecure)
	}

	opts := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256 << 20)),
		// The caller's span goes with every unary call (see tracing.go).
		grpc.WithChainUnaryInterceptor(traceInterceptor)}
	if useTLS {
		cfg, err := t.config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	md := map[string]string{}
	if apiKey != "" {
		md[authorizationHeader] = "Bearer " + apiKey
	}
	if namespace != "" {
		md[namespaceHeader] = namespace
	}
	if len(md) > 0 {
		opts = append(opts, grpc.WithPerRPCCredentials(callMetadata{md}))
	}
	return &endpoint{target: hostport, opts: append(opts, o.dial...)}, nil
}

func (e *endpoint) dial() (*grpc.ClientConn, error) {
	return grpc.NewClient(e.target, e.opts...)
}

// splitScheme splits "https://host:port/" into "https" and "host:port".
func splitScheme(addr string) (scheme, hostport string) {
	if i := strings.Index(addr, "://"); i >= 0 {
		scheme, addr = strings.ToLower(addr[:i]), addr[i+len("://"):]
	}
	return scheme, strings.TrimSuffix(addr, "/")
}

// isLoopback: hostport names this machine — localhost, 127.x.x.x, ::1 ([::1]:port) — or is
// a unix socket (gRPC's unix: and unix-abstract: targets).
func isLoopback(hostport string) bool {
	lower := strings.ToLower(hostport)
	if strings.HasPrefix(lower, "unix:") || strings.HasPrefix(lower, "unix-abstract:") {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// envTrue: the environment variable says yes (1, true, yes or on).
func envTrue(name string) bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(name))) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// headerSafe: s can be sent as a gRPC metadata value as it is (visible ASCII, no spaces).
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// config is the tls.Config of these (resolved) options.
func (t TLSOptions) config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	ca, err := pemOf("TLS CA", t.CAFile, t.CA)
	if err != nil {
		return nil, err
	}
	if ca != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("waymark: TLS CA%s holds no PEM certificate", fileNote(t.CAFile))
		}
		cfg.RootCAs = pool
	}
	cert, err := pemOf("TLS client certificate", t.CertFile, t.Cert)
	if err != nil {
		return nil, err
	}
	key, err := pemOf("TLS client key", t.KeyFile, t.Key)
	if err != nil {
		return nil, err
	}
	switch {
	case cert != nil && key != nil:
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("waymark: TLS client certificate%s and key%s: %w", fileNote(t.CertFile), fileNote(t.KeyFile), err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case cert != nil:
		return nil, errors.New("waymark: a TLS client certificate needs its key too (TLSOptions.KeyFile or Key, or WAYMARK_TLS_KEY)")
	case key != nil:
		return nil, errors.New("waymark: a TLS client key needs its certificate too (TLSOptions.CertFile or Cert, or WAYMARK_TLS_CERT)")
	}
	return cfg, nil
}

// pemOf is a PEM given as a file or as text (nil when neither).
func pemOf(what, path string, text []byte) ([]byte, error) {
	switch {
	case path != "" && len(text) > 0:
		return nil, fmt.Errorf("waymark: %s given both as a file and as PEM text: give one", what)
	case path != "":
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("waymark: reading the %s: %w", what, err)
		}
		return b, nil
	case len(text) > 0:
		return text, nil
	}
	return nil, nil
}

func fileNote(path string) string {
	if path == "" {
		return ""
	}
	return " (" + path + ")"
}

// callMetadata is the metadata every call carries: the API key and the namespace. Sent over
// plaintext too (a server on loopback, or with Insecure), so it does not require transport
// security; resolve refuses a key over plaintext elsewhere.
type callMetadata struct{ md map[string]string }

func (c callMetadata) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return maps.Clone(c.md), nil
}

func (callMetadata) RequireTransportSecurity() bool { return false }

// String keeps the key out of anything that prints the options.
func (callMetadata) String() string { return "waymark call metadata" }
