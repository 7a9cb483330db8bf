//! `waymark-test-certs DIR`: writes a throwaway certificate authority and, signed by it, a
//! server certificate for `localhost` and `127.0.0.1` and a client certificate, for tests of
//! TLS and mutual TLS in every SDK's suite. Nothing it writes is checked in: each test run makes
//! its own, and the private keys never leave the test's temporary directory.
//!
//! Files: `ca.pem`, `server.pem`, `server.key`, `client.pem`, `client.key`; and a second,
//! unrelated authority `other-ca.pem` (a client trusting only it must refuse the server).

fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: waymark-test-certs DIR"))?;
    waymark_integration_tests::certs::write(std::path::Path::new(&dir))?;
    Ok(())
}
