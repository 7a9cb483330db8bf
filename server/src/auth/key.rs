//! The text of an API key: `wmk_<key_id>_<secret>`. The key id (64 random bits, hex) is public:
//! lists and revocations name a key by it, and a lookup finds the row by it. The secret
//! (256 random bits, hex) is shown once and kept only as its SHA-256: with that much entropy
//! there is nothing to guess, so a fast hash suffices and a check costs microseconds.

use rand::RngCore;
use sha2::{Digest, Sha256};

const PREFIX: &str = "wmk_";
const ID_HEX: usize = 16;
const SECRET_HEX: usize = 64;

/// A key as presented: its public id and its secret.
#[derive(Debug, PartialEq, Eq)]
pub struct PresentedKey<'a> {
    pub key_id: &'a str,
    pub secret: &'a str,
}

/// A new key: the text to hand out once, its id, and the hash to store.
pub struct NewKey {
    pub text: String,
    pub key_id: String,
    pub secret_sha256: String,
}

pub fn generate() -> NewKey {
    let mut id = [0u8; ID_HEX / 2];
    let mut secret = [0u8; SECRET_HEX / 2];
    rand::rng().fill_bytes(&mut id);
    rand::rng().fill_bytes(&mut secret);
    let (key_id, secret) = (hex::encode(id), hex::encode(secret));
    NewKey {
        text: format!("{PREFIX}{key_id}_{secret}"),
        secret_sha256: hash(&secret),
        key_id,
    }
}

/// Splits a presented key; `None` for anything not shaped like one (so nothing malformed ever
/// reaches the database).
pub fn parse(text: &str) -> Option<PresentedKey<'_>> {
    let rest = text.strip_prefix(PREFIX)?;
    let (key_id, secret) = rest.split_once('_')?;
    let hex_of = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex_of(key_id, ID_HEX) && hex_of(secret, SECRET_HEX)).then_some(PresentedKey { key_id, secret })
}

pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Whether `secret` hashes to `stored`, comparing every byte whatever the first difference.
pub fn matches(secret: &str, stored: &str) -> bool {
    let presented = hash(secret);
    presented.len() == stored.len()
        && presented
            .bytes()
            .zip(stored.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_parses_and_matches_only_its_own_hash() {
        let k = generate();
        let p = parse(&k.text).expect("parses");
        assert_eq!(p.key_id, k.key_id);
        assert!(matches(p.secret, &k.secret_sha256));
        let other = generate();
        assert!(!matches(p.secret, &other.secret_sha256));
        assert_ne!(k.key_id, other.key_id);
    }

    #[test]
    fn malformed_keys_do_not_parse() {
        let k = generate();
        for bad in [
            "",
            "wmk_",
            "Bearer x",
            &k.text[1..],
            &k.text[..k.text.len() - 1],
            &format!("{}0", k.text),
            &k.text.replace("wmk_", "wmx_"),
            &format!("wmk_{}_{}", "g".repeat(16), "0".repeat(64)),
            &format!("wmk_{}_{}_", "0".repeat(16), "0".repeat(64)),
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
