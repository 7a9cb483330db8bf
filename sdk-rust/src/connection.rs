//! How to reach the server and who to be there: the address (`https://` means TLS), the CA that
//! signs the server's certificate, a client certificate for mutual TLS, an API key and a
//! namespace. Each falls back to its environment variable, so a program configured by its
//! environment needs no code for it:
//!
//! | option | environment |
//! |---|---|
//! | server address | `WAYMARK_SERVER` (else `http://127.0.0.1:7450`) |
//! | CA certificate (PEM file) | `WAYMARK_TLS_CA` |
//! | client certificate and key (PEM files) | `WAYMARK_TLS_CERT`, `WAYMARK_TLS_KEY` |
//! | API key | `WAYMARK_API_KEY` |
//! | namespace | `WAYMARK_NAMESPACE` |
//! | send a key over plaintext beyond loopback | `WAYMARK_INSECURE=1` |
//!
//! An address without a scheme is TLS when any TLS option is set; an `http://` address with
//! TLS options is refused rather than silently sent in the clear. `https://` without a CA
//! trusts the usual web roots. An API key is never sent in the clear to another machine: a key
//! with a plaintext address whose host is not loopback (`localhost`, `127.x.x.x`, `::1`) is
//! refused unless [`insecure`](ConnectOptions::insecure) (or `WAYMARK_INSECURE=1`) says so.

use tonic::{
    metadata::{Ascii, MetadataValue},
    service::{interceptor::InterceptedService, Interceptor},
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity},
};

use crate::Error;

/// Where and how to connect (see the module docs).
#[derive(Clone, Default)]
pub struct ConnectOptions {
    server: Option<String>,
    tls_ca: Option<Vec<u8>>,
    client_identity: Option<(Vec<u8>, Vec<u8>)>,
    api_key: Option<String>,
    namespace: Option<String>,
    insecure: bool,
}

// Hand-written so a key never reaches a log through `{:?}`.
impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("server", &self.server)
            .field("tls_ca", &self.tls_ca.is_some())
            .field("client_identity", &self.client_identity.is_some())
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("namespace", &self.namespace)
            .field("insecure", &self.insecure)
            .finish()
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn read_env_file(name: &str) -> Result<Option<Vec<u8>>, Error> {
    env(name)
        .map(|path| {
            std::fs::read(&path).map_err(|e| Error::Transport(format!("cannot read {name} file {path:?}: {e}")))
        })
        .transpose()
}

impl ConnectOptions {
    /// Options for `server`, everything else from the environment.
    pub fn new(server: impl Into<String>) -> Self {
        ConnectOptions {
            server: Some(server.into()),
            ..Default::default()
        }
    }

    /// Everything from the environment.
    pub fn from_env() -> Self {
        Self::default()
    }

    /// The server address (`https://` for TLS).
    pub fn server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    /// Trust servers whose certificate this CA (PEM) signed.
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_ca = Some(pem.into());
        self
    }

    /// Present this certificate and key (PEM) to a server that asks for one (mutual TLS).
    pub fn client_identity_pem(mut self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.client_identity = Some((cert.into(), key.into()));
        self
    }

    /// Send this API key (`authorization: Bearer …`) with every call.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Act in this namespace (`waymark-namespace` metadata).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Allow sending the API key over plaintext (`http://`) to a host that is not loopback —
    /// for a network you trust to carry it (a sidecar, a private link). Also `WAYMARK_INSECURE=1`.
    pub fn insecure(mut self, insecure: bool) -> Self {
        self.insecure = insecure;
        self
    }

    /// The options with every unset field taken from the environment.
    fn resolved(&self) -> Result<Resolved, Error> {
        let tls_ca = match &self.tls_ca {
            Some(p) => Some(p.clone()),
            None => read_env_file("WAYMARK_TLS_CA")?,
        };
        let identity = match &self.client_identity {
            Some(i) => Some(i.clone()),
            None => match (read_env_file("WAYMARK_TLS_CERT")?, read_env_file("WAYMARK_TLS_KEY")?) {
                (Some(c), Some(k)) => Some((c, k)),
                (None, None) => None,
                _ => {
                    return Err(Error::Transport(
                        "WAYMARK_TLS_CERT and WAYMARK_TLS_KEY go together: set both or neither".into(),
                    ))
                }
            },
        };
        let server = self.server.clone().or_else(|| env("WAYMARK_SERVER"));
        let wants_tls = tls_ca.is_some() || identity.is_some();
        let address = match server {
            Some(s) if s.contains("://") => {
                if wants_tls && s.starts_with("http://") {
                    return Err(Error::Transport(format!(
                        "TLS options are set but the server address {s:?} is http://: use https://"
                    )));
                }
                s
            }
            Some(s) if wants_tls => format!("https://{s}"),
            Some(s) => format!("http://{s}"),
            None if wants_tls => "https://127.0.0.1:7450".into(),
            None => "http://127.0.0.1:7450".into(),
        };
        let api_key = self.api_key.clone().or_else(|| env("WAYMARK_API_KEY"));
        let insecure = self.insecure
            || env("WAYMARK_INSECURE").is_some_and(|v| ["1", "true", "yes", "on"].contains(&v.to_lowercase().as_str()));
        if api_key.is_some() && !address.starts_with("https://") && !insecure && !loopback(&address) {
            return Err(Error::Transport(format!(
                "refusing to send the API key unencrypted to {address}: use an https:// address (TLS), \
                 or allow plaintext with the insecure option (WAYMARK_INSECURE=1; --insecure on the command line)"
            )));
        }
        let header = |what: &str, v: String| {
            MetadataValue::try_from(v).map_err(|_| Error::Transport(format!("the {what} is not valid header text")))
        };
        Ok(Resolved {
            tls: address.starts_with("https://"),
            address,
            tls_ca,
            identity,
            credentials: Credentials {
                authorization: api_key.map(|k| header("API key", format!("Bearer {k}"))).transpose()?,
                namespace: self
                    .namespace
                    .clone()
                    .or_else(|| env("WAYMARK_NAMESPACE"))
                    .map(|n| header("namespace", n))
                    .transpose()?,
            },
        })
    }

    /// The address calls go to, as resolved (for messages).
    pub fn address(&self) -> String {
        self.resolved()
            .map(|r| r.address)
            .unwrap_or_else(|_| self.server.clone().unwrap_or_default())
    }

    /// Opens a channel to the server with these options.
    pub(crate) async fn connect(&self) -> Result<Transport, Error> {
        let r = self.resolved()?;
        let addr = r.address.clone();
        let mut endpoint = Endpoint::from_shared(addr.clone())
            .map_err(|e| Error::Transport(format!("bad server address {addr:?}: {e}")))?
            .tcp_nodelay(true)
            .connect_timeout(std::time::Duration::from_secs(5))
            .http2_keep_alive_interval(std::time::Duration::from_secs(20))
            .keep_alive_timeout(std::time::Duration::from_secs(60))
            .keep_alive_while_idle(true);
        if r.tls {
            let mut tls = ClientTlsConfig::new();
            tls = match r.tls_ca {
                Some(ca) => tls.ca_certificate(Certificate::from_pem(ca)),
                None => tls.with_webpki_roots(),
            };
            if let Some((cert, key)) = r.identity {
                tls = tls.identity(Identity::from_pem(cert, key));
            }
            endpoint = endpoint
                .tls_config(tls)
                .map_err(|e| Error::Transport(format!("bad TLS settings: {e}")))?;
        }
        let channel = endpoint.connect().await.map_err(|e| {
            Error::Transport(format!(
                "cannot reach the Waymark server at {addr}: {}",
                source_chain(&e)
            ))
        })?;
        Ok(InterceptedService::new(channel, r.credentials))
    }
}

/// Whether the host of `address` (`scheme://host:port/…`) is this machine's loopback.
fn loopback(address: &str) -> bool {
    let rest = address.split_once("://").map_or(address, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// An error with its causes, so a TLS failure says what failed ("invalid peer certificate").
fn source_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

struct Resolved {
    address: String,
    tls: bool,
    tls_ca: Option<Vec<u8>>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    credentials: Credentials,
}

/// The channel every client and worker call goes through, with the credentials attached.
pub(crate) type Transport = InterceptedService<Channel, Credentials>;

/// Adds the API key and namespace to every call.
#[derive(Clone, Default)]
pub struct Credentials {
    authorization: Option<MetadataValue<Ascii>>,
    namespace: Option<MetadataValue<Ascii>>,
}

impl Interceptor for Credentials {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(a) = &self.authorization {
            req.metadata_mut().insert("authorization", a.clone());
        }
        if let Some(n) = &self.namespace {
            req.metadata_mut().insert("waymark-namespace", n.clone());
        }
        // The caller's current span (OpenTelemetry), so the server's spans and the work it
        // starts join the caller's trace.
        if let Some(t) = crate::tracing_ctx::current_wire() {
            if let Ok(v) = t.traceparent.parse() {
                req.metadata_mut().insert("traceparent", v);
            }
            match t.tracestate.parse() {
                Ok(v) if !t.tracestate.is_empty() => {
                    req.metadata_mut().insert("tracestate", v);
                }
                _ => {}
            }
        }
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_resolve_to_tls_only_when_asked() {
        let plain = ConnectOptions::new("127.0.0.1:1").resolved().unwrap();
        assert_eq!((plain.address.as_str(), plain.tls), ("http://127.0.0.1:1", false));
        let https = ConnectOptions::new("https://h:1").resolved().unwrap();
        assert!(https.tls);
        let implied = ConnectOptions::new("h:1").tls_ca_pem("x").resolved().unwrap();
        assert_eq!((implied.address.as_str(), implied.tls), ("https://h:1", true));
        let clash = ConnectOptions::new("http://h:1").tls_ca_pem("x").resolved();
        assert!(matches!(clash, Err(Error::Transport(m)) if m.contains("https://")));
    }

    #[test]
    fn a_key_is_never_sent_in_the_clear_beyond_loopback() {
        let key = "wmk_0123456789abcdef_secret";
        for remote in [
            "http://h:1",
            "h:1",
            "http://10.0.0.5:7450",
            "http://[2001:db8::1]:1",
            "http://0.0.0.0:1",
        ] {
            let e = ConnectOptions::new(remote).api_key(key).resolved().err().expect(remote);
            let text = e.to_string();
            assert!(text.contains("unencrypted") && text.contains("insecure"), "{text}");
            assert!(!text.contains("secret"), "the key is not in the error: {text}");
            assert!(
                ConnectOptions::new(remote)
                    .api_key(key)
                    .insecure(true)
                    .resolved()
                    .is_ok(),
                "{remote}"
            );
            assert!(ConnectOptions::new(remote).resolved().is_ok(), "no key: {remote}");
        }
        for local in [
            "http://127.0.0.1:1",
            "localhost:1",
            "http://LOCALHOST:1/x",
            "http://[::1]:1",
            "127.9.9.9:1",
        ] {
            assert!(ConnectOptions::new(local).api_key(key).resolved().is_ok(), "{local}");
        }
        assert!(ConnectOptions::new("https://h:1").api_key(key).resolved().is_ok());
        assert!(ConnectOptions::new("h:1")
            .tls_ca_pem("x")
            .api_key(key)
            .resolved()
            .is_ok());
    }

    #[test]
    fn a_key_is_sent_as_a_bearer_token_and_never_printed() {
        let o = ConnectOptions::new("127.0.0.1:1")
            .api_key("wmk_secret")
            .namespace("default");
        let mut c = o.resolved().unwrap().credentials;
        let req = c.call(tonic::Request::new(())).unwrap();
        assert_eq!(req.metadata().get("authorization").unwrap(), "Bearer wmk_secret");
        assert_eq!(req.metadata().get("waymark-namespace").unwrap(), "default");
        assert!(!format!("{o:?}").contains("wmk_secret"));
        let bad = ConnectOptions::new("127.0.0.1:1").api_key("line\nbreak").resolved();
        assert!(bad.is_err());
    }
}
