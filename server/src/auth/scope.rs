//! What an admin key may manage. An admin key is an admin of the namespaces it lists, not of the
//! server: it makes, lists and revokes keys that act only inside those namespaces, and never
//! grants more than it holds — no namespace it lacks, no `*`, no later expiry. Only an admin of
//! every namespace (`*`) creates or deletes namespaces and mints `*` keys.
//!
//! Pure decisions over a [`Principal`] and a key's facts, so they are tested without a server.
//! `None` for the caller means authentication is off: the loopback quickstart may do anything.

use waymark_store::ApiKeyRecord;

use super::{permission_denied, KeySpec, Principal, Role, ANY_NAMESPACE};
use crate::engine::{EngineError, EngineResult};

impl Principal {
    /// An admin of every namespace: the only kind that manages namespaces and `*` keys.
    pub fn administers_all(&self) -> bool {
        self.role == Role::Admin && self.namespaces.iter().any(|n| n == ANY_NAMESPACE)
    }

    /// Whether this admin manages keys that act in `namespace`.
    pub fn administers(&self, namespace: &str) -> bool {
        self.role == Role::Admin && self.may_act_in(namespace)
    }

    /// Whether this admin manages `key`: every namespace the key acts in is one it administers
    /// (a `*` key only by a `*` admin).
    pub fn manages(&self, key: &ApiKeyRecord) -> bool {
        self.administers_all() || key.namespaces.iter().all(|n| n != ANY_NAMESPACE && self.administers(n))
    }
}

/// Refused unless the caller administers every namespace.
pub fn require_all(by: Option<&Principal>, what: &str) -> EngineResult<()> {
    match by {
        Some(p) if !p.administers_all() => Err(permission_denied(format!(
            "only an admin key of every namespace ('*') may {what}"
        ))),
        _ => Ok(()),
    }
}

/// Refused unless the caller administers `namespace`.
pub fn require_namespace(by: Option<&Principal>, namespace: &str) -> EngineResult<()> {
    match by {
        Some(p) if !p.administers(namespace) => Err(permission_denied(format!(
            "this key does not administer namespace {namespace:?}"
        ))),
        _ => Ok(()),
    }
}

/// Checks a new key against what its maker holds, and fills what the spec leaves open: the
/// namespaces (the maker's own one when it has exactly one, else `default`) and the expiry (no
/// later than the maker's). An admin key must name its namespaces: an empty list would read as
/// `default` and look like a scope it is not.
pub fn grant(by: Option<&Principal>, spec: &mut KeySpec) -> EngineResult<()> {
    if spec.role == Role::Admin && spec.namespaces.is_empty() {
        return Err(EngineError::invalid(
            "an admin key needs its namespaces named (`*` for every one)",
        ));
    }
    let Some(by) = by else {
        if spec.namespaces.is_empty() {
            spec.namespaces = vec![super::DEFAULT_NAMESPACE.to_string()];
        }
        return Ok(());
    };
    if spec.namespaces.is_empty() {
        spec.namespaces = match by.namespaces.as_slice() {
            [only] if only != ANY_NAMESPACE => vec![only.clone()],
            _ => vec![super::DEFAULT_NAMESPACE.to_string()],
        };
    }
    for n in &spec.namespaces {
        if n == ANY_NAMESPACE {
            require_all(Some(by), "grant every namespace ('*')")?;
        } else {
            require_namespace(Some(by), n)?;
        }
    }
    if let Some(limit) = by.expires_at {
        match spec.expires_at {
            None => spec.expires_at = Some(limit),
            Some(t) if t > limit => {
                return Err(permission_denied(
                    "a key may not outlive the key that makes it: expires_at is later than this key's",
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin(namespaces: &[&str], expires_at: Option<i64>) -> Principal {
        Principal {
            key_id: "a".into(),
            role: Role::Admin,
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            name_patterns: vec![],
            expires_at,
        }
    }

    fn spec(role: Role, namespaces: &[&str], expires_at: Option<i64>) -> KeySpec {
        KeySpec {
            name: "k".into(),
            role,
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            name_patterns: vec![],
            expires_at,
        }
    }

    fn record(namespaces: &[&str]) -> ApiKeyRecord {
        ApiKeyRecord {
            key_id: "k".into(),
            secret_sha256: String::new(),
            name: String::new(),
            role: "client".into(),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            name_patterns: vec![],
            created_at: 0,
            expires_at: None,
            revoked_at: None,
        }
    }

    fn refused(r: EngineResult<()>) -> &'static str {
        r.unwrap_err().reason
    }

    #[test]
    fn a_namespace_admin_grants_only_inside_its_namespaces() {
        let billing = admin(&["billing"], None);
        let mut s = spec(Role::Client, &["billing"], None);
        grant(Some(&billing), &mut s).unwrap();
        let mut s = spec(Role::Admin, &["billing"], None);
        grant(Some(&billing), &mut s).expect("an admin of billing may make another");
        for ns in [&["other"][..], &["billing", "other"], &["*"], &["default"]] {
            let mut s = spec(Role::Admin, ns, None);
            assert_eq!(refused(grant(Some(&billing), &mut s)), "PERMISSION_DENIED", "{ns:?}");
            let mut s = spec(Role::Reader, ns, None);
            assert_eq!(refused(grant(Some(&billing), &mut s)), "PERMISSION_DENIED", "{ns:?}");
        }
        // Unnamed: its own one namespace, not default.
        let mut s = spec(Role::Worker, &[], None);
        grant(Some(&billing), &mut s).unwrap();
        assert_eq!(s.namespaces, ["billing"]);
    }

    #[test]
    fn an_admin_key_must_name_its_namespaces() {
        for by in [None, Some(admin(&["*"], None))] {
            let mut s = spec(Role::Admin, &[], None);
            assert_eq!(refused(grant(by.as_ref(), &mut s)), "INVALID_ARGUMENT");
        }
        let mut s = spec(Role::Admin, &["*"], None);
        grant(Some(&admin(&["*"], None)), &mut s).expect("a * admin grants *");
        let mut s = spec(Role::Client, &[], None);
        grant(Some(&admin(&["*"], None)), &mut s).unwrap();
        assert_eq!(s.namespaces, ["default"]);
    }

    #[test]
    fn a_key_never_outlives_its_maker() {
        let brief = admin(&["*"], Some(1_000));
        let mut s = spec(Role::Client, &["default"], None);
        grant(Some(&brief), &mut s).unwrap();
        assert_eq!(s.expires_at, Some(1_000), "inherits the maker's expiry");
        let mut s = spec(Role::Client, &["default"], Some(999));
        grant(Some(&brief), &mut s).unwrap();
        assert_eq!(s.expires_at, Some(999));
        let mut s = spec(Role::Client, &["default"], Some(1_001));
        assert_eq!(refused(grant(Some(&brief), &mut s)), "PERMISSION_DENIED");
    }

    #[test]
    fn admins_manage_keys_wholly_inside_their_namespaces() {
        let billing = admin(&["billing", "shop"], None);
        assert!(billing.manages(&record(&["billing"])));
        assert!(billing.manages(&record(&["billing", "shop"])));
        assert!(!billing.manages(&record(&["billing", "other"])));
        assert!(!billing.manages(&record(&["*"])));
        let all = admin(&["*"], None);
        assert!(all.manages(&record(&["*"])) && all.manages(&record(&["x"])));
        let not_admin = Principal {
            role: Role::Client,
            ..admin(&["*"], None)
        };
        assert!(!not_admin.manages(&record(&["x"])) && !not_admin.administers_all());
        assert_eq!(
            refused(require_all(Some(&billing), "create namespaces")),
            "PERMISSION_DENIED"
        );
        assert!(require_all(None, "create namespaces").is_ok());
        assert!(require_namespace(Some(&billing), "shop").is_ok());
        assert_eq!(refused(require_namespace(Some(&billing), "other")), "PERMISSION_DENIED");
    }
}
