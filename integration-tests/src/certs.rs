//! Certificates a test makes for itself (see the `waymark-test-certs` binary).

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};

/// An authority that signs the server and client certificates.
struct Authority {
    cert: rcgen::Certificate,
    issuer: rcgen::Issuer<'static, KeyPair>,
}

fn authority(name: &str) -> anyhow::Result<Authority> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(Authority {
        cert,
        issuer: rcgen::Issuer::new(params, key),
    })
}

fn leaf(ca: &Authority, names: &[&str], cn: &str) -> anyhow::Result<(String, String)> {
    let mut params = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
    params.distinguished_name.push(DnType::CommonName, cn);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca.issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Writes `ca.pem`, `server.pem`/`server.key` (for localhost and 127.0.0.1),
/// `client.pem`/`client.key` and an unrelated `other-ca.pem` into `dir`.
pub fn write(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let ca = authority("waymark test authority")?;
    let other = authority("an authority nobody trusts")?;
    let (server, server_key) = leaf(&ca, &["localhost", "127.0.0.1"], "waymark test server")?;
    let (client, client_key) = leaf(&ca, &["waymark-test-client"], "waymark test client")?;
    std::fs::write(dir.join("ca.pem"), ca.cert.pem())?;
    std::fs::write(dir.join("other-ca.pem"), other.cert.pem())?;
    std::fs::write(dir.join("server.pem"), server)?;
    std::fs::write(dir.join("server.key"), server_key)?;
    std::fs::write(dir.join("client.pem"), client)?;
    std::fs::write(dir.join("client.key"), client_key)?;
    Ok(())
}
