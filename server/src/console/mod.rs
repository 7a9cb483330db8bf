//! The web console, served by the server itself on its own port (`--console-listen`): the
//! embedded single-page app of `console/` ([`assets`]) and, beside it on the same origin, the
//! public gRPC API translated from gRPC-web, so the browser is one more client of the API and
//! passes the same keys, roles, limits and audit trail as every other ([`gate`]).
//!
//! Why gRPC-web rather than pages rendered here: the console then needs nothing the API does
//! not offer (what it lacks, every client lacks), and no second door to keep in step with the
//! first. ARCHITECTURE.md ("The console") says more.

pub mod assets;
pub mod gate;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Where the console listens.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ConsoleListen {
    /// On loopback, one port above the gRPC port (7451 beside the default 7450); on a free port
    /// of loopback when that one is taken or the gRPC port was chosen by the system (0).
    #[default]
    Beside,
    /// Exactly here; failing to listen fails the start.
    At(String),
    Off,
}

impl ConsoleListen {
    /// `off`, or an address (`127.0.0.1:7451`, `0.0.0.0:8080`).
    pub fn parse(s: &str) -> Result<ConsoleListen, String> {
        match s.trim() {
            "" => Err("give an address like 127.0.0.1:7451, or off".into()),
            "off" | "none" | "false" => Ok(ConsoleListen::Off),
            a => Ok(ConsoleListen::At(a.to_string())),
        }
    }
}

/// How the console is served (`waymark server --help`).
#[derive(Debug, Clone, Default)]
pub struct ConsoleOptions {
    pub listen: ConsoleListen,
    /// No write action, whatever the key: writes through the console's port are refused.
    pub read_only: bool,
}

/// What clients are told of the console (WhoAmI, the CLI's links).
#[derive(Debug, Clone, Default)]
pub struct ConsoleInfo {
    /// `http://127.0.0.1:7451/`; `None` when the console is off.
    pub url: Option<String>,
    pub read_only: bool,
}

impl ConsoleInfo {
    /// The console's page of a workflow, when the console is on.
    pub fn workflow_url(&self, namespace: &str, workflow_id: &str) -> Option<String> {
        self.url
            .as_ref()
            .map(|base| format!("{base}ns/{}/workflows/{}", encode(namespace), encode(workflow_id)))
    }
}

/// Percent-encodes a path segment (ids may hold any character but `/`-free is not promised).
pub fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Binds the console's listener (`None`: off). `beside` is the gRPC listener's address.
pub async fn bind(listen: &ConsoleListen, beside: SocketAddr) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    match listen {
        ConsoleListen::Off => Ok(None),
        ConsoleListen::At(addr) => {
            Ok(Some(tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                anyhow::anyhow!("cannot listen on {addr} for the console: {e}")
            })?))
        }
        ConsoleListen::Beside => {
            let loopback = match beside.ip() {
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            };
            let next = match beside.port() {
                0 | u16::MAX => 0,
                p => p + 1,
            };
            match tokio::net::TcpListener::bind(SocketAddr::new(loopback, next)).await {
                Ok(l) => Ok(Some(l)),
                Err(e) => {
                    tracing::warn!(port = next, error = %e, "the console's usual port is taken; it listens on a free one");
                    Ok(Some(tokio::net::TcpListener::bind(SocketAddr::new(loopback, 0)).await?))
                }
            }
        }
    }
}

/// The console's address as a browser opens it.
pub fn url_of(addr: SocketAddr, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    let host = match addr.ip() {
        ip if ip.is_unspecified() => match ip {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        },
        ip => ip,
    };
    format!("{scheme}://{}/", SocketAddr::new(host, addr.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_parses_off_and_addresses() {
        assert_eq!(ConsoleListen::parse("off"), Ok(ConsoleListen::Off));
        assert_eq!(
            ConsoleListen::parse("0.0.0.0:80"),
            Ok(ConsoleListen::At("0.0.0.0:80".into()))
        );
        assert!(ConsoleListen::parse(" ").is_err());
    }

    #[test]
    fn urls_name_a_reachable_host_and_encode_ids() {
        assert_eq!(url_of("0.0.0.0:7451".parse().unwrap(), false), "http://127.0.0.1:7451/");
        assert_eq!(url_of("[::1]:7451".parse().unwrap(), true), "https://[::1]:7451/");
        let info = ConsoleInfo {
            url: Some("http://127.0.0.1:7451/".into()),
            read_only: false,
        };
        assert_eq!(
            info.workflow_url("default", "order 7/x").as_deref(),
            Some("http://127.0.0.1:7451/ns/default/workflows/order%207%2Fx")
        );
        assert_eq!(ConsoleInfo::default().workflow_url("default", "a"), None);
    }

    #[tokio::test]
    async fn beside_takes_the_next_port_or_a_free_one() {
        let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = grpc.local_addr().unwrap();
        // The next port may belong to someone else already: then a free one is taken.
        let console = bind(&ConsoleListen::Beside, at).await.unwrap().unwrap();
        let port = console.local_addr().unwrap().port();
        assert!(console.local_addr().unwrap().ip().is_loopback());
        assert_ne!(port, at.port());
        // Taken now, so another console beside the same port goes elsewhere, and starts.
        let other = bind(&ConsoleListen::Beside, SocketAddr::new(at.ip(), port - 1))
            .await
            .unwrap()
            .unwrap();
        assert_ne!(other.local_addr().unwrap().port(), port);
        assert!(bind(&ConsoleListen::Off, at).await.unwrap().is_none());
        let taken = format!("127.0.0.1:{port}");
        assert!(bind(&ConsoleListen::At(taken), at).await.is_err());
    }
}
