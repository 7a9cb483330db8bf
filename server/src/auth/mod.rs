//! Who is calling, and what they may do. With authentication on (`waymark server --auth`) every
//! call but health checks and reflection carries an API key (`authorization: Bearer wmk_…`);
//! the key's role decides which calls it may make ([`access`]), its namespaces where, and a
//! worker key's name patterns which workflows and steps its worker may register.
//!
//! Keys are checked against the database through a cache ([`cache`]), so authentication costs
//! no round trip per call. A refusal never says whether a key exists: every bad key is the same
//! UNAUTHENTICATED.

pub mod access;
pub mod cache;
pub mod key;
pub mod peers;
pub mod scope;

use std::{sync::Arc, time::Duration};

use waymark_store::{ApiKeyRecord, Millis, Store};

use crate::engine::{Clock, EngineError, EngineResult, ErrorCode};

/// What a key may do (see `Role` in admin.proto).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Reader,
    Client,
    Worker,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Client => "client",
            Role::Worker => "worker",
            Role::Admin => "admin",
        }
    }
    pub fn parse(s: &str) -> Option<Role> {
        [Role::Reader, Role::Client, Role::Worker, Role::Admin]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

/// The namespace a request is in when it names none.
pub const DEFAULT_NAMESPACE: &str = crate::namespaces::DEFAULT;
/// A key's namespace that stands for all of them.
pub const ANY_NAMESPACE: &str = "*";

/// The verified caller of one request (or one worker stream).
#[derive(Debug, Clone)]
pub struct Principal {
    pub key_id: String,
    pub role: Role,
    pub namespaces: Vec<String>,
    pub name_patterns: Vec<String>,
    /// When the key stops working: nothing it makes may outlive it.
    pub expires_at: Option<Millis>,
}

impl Principal {
    pub fn may_act_in(&self, namespace: &str) -> bool {
        self.namespaces.iter().any(|n| n == ANY_NAMESPACE || n == namespace)
    }

    /// Whether a worker with this key may register `name`: any name when the key has no
    /// patterns; else one equal to a pattern, or starting with a pattern's text before its
    /// closing `*`.
    pub fn may_register(&self, name: &str) -> bool {
        self.name_patterns.is_empty() || self.name_patterns.iter().any(|p| pattern_matches(p, name))
    }
}

// Defined with the engine, which checks them too (a worker's reach, a remote step's server);
// the engine knows nothing of keys.
pub use crate::engine::error::{permission_denied, unauthenticated};
pub use crate::engine::validate::pattern_matches;

/// How often a long call (an open worker stream, AwaitWorkflow, GetEvent, ReadStream) checks
/// that its key is still good — through the key cache, so mostly without a database read: a
/// revoked key's calls end within this and the cache's time to live.
pub const KEY_RECHECK: Duration = Duration::from_secs(1);

/// A long call's key, watched: [`revoked`](Self::revoked) resolves once the key is revoked,
/// expires, or no longer acts in the call's namespace. The authentication layer puts one in
/// every authenticated call's extensions.
#[derive(Clone)]
pub struct KeyWatch {
    pub auth: Arc<Authenticator>,
    pub principal: Arc<Principal>,
    pub namespace: String,
}

impl KeyWatch {
    pub async fn revoked(&self) {
        let mut every = tokio::time::interval(KEY_RECHECK);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            every.tick().await;
            if !self.auth.still_valid(&self.principal, &self.namespace).await {
                return;
            }
        }
    }
}

/// Most keys one replica keeps verified in memory.
pub const MAX_CACHED_KEYS: usize = 10_000;
/// Most keys a list returns.
pub const MAX_LISTED_KEYS: u32 = 10_000;

/// Checks keys and makes and revokes them.
pub struct Authenticator {
    /// Off: every call is let in, as the one principal-less caller (the loopback quickstart).
    pub enabled: bool,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    cache: cache::KeyCache,
    /// Bounds the database reads for keys not in the cache, so a flood of made-up keys queues
    /// here instead of at the database…
    lookups: tokio::sync::Semaphore,
    /// …and each remote address may cause only so many of them ([`peers`]).
    pub peers: peers::PeerLimits,
}

/// A key as made, with the text shown once.
pub struct CreatedKey {
    pub record: ApiKeyRecord,
    pub text: String,
}

/// What a new key may do.
pub struct KeySpec {
    pub name: String,
    pub role: Role,
    pub namespaces: Vec<String>,
    pub name_patterns: Vec<String>,
    pub expires_at: Option<Millis>,
}

impl Authenticator {
    pub fn new(enabled: bool, store: Arc<dyn Store>, clock: Arc<dyn Clock>, cache_ttl: Duration) -> Self {
        Authenticator {
            enabled,
            store,
            clock,
            cache: cache::KeyCache::new(cache_ttl, MAX_CACHED_KEYS),
            lookups: tokio::sync::Semaphore::new(16),
            peers: peers::PeerLimits::default(),
        }
    }

    /// The principal behind an `authorization` header value, if the key is valid now. `peer`
    /// is the caller's address: a key not cached costs a database read, which each address may
    /// cause only so often (refused as UNAUTHENTICATED past that, without a read).
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
        peer: Option<std::net::IpAddr>,
    ) -> EngineResult<Principal> {
        let checked = self.check(authorization, peer).await;
        if matches!(&checked, Err(e) if e.reason == "UNAUTHENTICATED") && !self.peers.refused(peer) {
            // Past its allowance of refusals: this address waits for each one.
            tokio::time::sleep(peers::TARPIT).await;
        }
        checked
    }

    async fn check(&self, authorization: Option<&str>, peer: Option<std::net::IpAddr>) -> EngineResult<Principal> {
        let text = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or_else(unauthenticated)?;
        let presented = key::parse(text).ok_or_else(unauthenticated)?;
        let record = match self.cache.get(presented.key_id).await {
            Some(known) => known,
            // A key read lately is refreshed whatever its address sends besides.
            None if !self.cache.known_to_exist(presented.key_id) && !self.peers.lookup(peer) => {
                return Err(unauthenticated())
            }
            None => self.lookup(presented.key_id).await?,
        }
        .ok_or_else(unauthenticated)?;
        if !key::matches(presented.secret, &record.secret_sha256) {
            return Err(unauthenticated());
        }
        self.principal(&record).ok_or_else(unauthenticated)
    }

    /// Whether the key behind `p` is still good (not revoked, not expired) and still acts in
    /// `namespace`, as the cache knows it: open streams and long polls ask this every second.
    pub async fn still_valid(&self, p: &Principal, namespace: &str) -> bool {
        matches!(self.lookup(&p.key_id).await, Ok(Some(r))
            if self.principal(&r).is_some_and(|now| now.may_act_in(namespace)))
    }

    fn principal(&self, r: &ApiKeyRecord) -> Option<Principal> {
        let now = self.clock.now();
        if r.revoked_at.is_some() || r.expires_at.is_some_and(|t| t <= now) {
            return None;
        }
        Some(Principal {
            key_id: r.key_id.clone(),
            role: Role::parse(&r.role)?,
            namespaces: r.namespaces.clone(),
            name_patterns: r.name_patterns.clone(),
            expires_at: r.expires_at,
        })
    }

    /// The stored record of a verified caller's key (its name, when it was made).
    pub async fn record_of(&self, p: &Principal) -> EngineResult<Option<ApiKeyRecord>> {
        self.lookup(&p.key_id).await
    }

    async fn lookup(&self, key_id: &str) -> EngineResult<Option<ApiKeyRecord>> {
        self.cache
            .get_or_read(key_id, async {
                let _turn = self.lookups.acquire().await.expect("never closed");
                Ok(self.store.get_api_key(key_id).await?)
            })
            .await
    }

    /// Makes a key for `by` (`None`: authentication is off), never granting more than `by`
    /// holds ([`scope::grant`]).
    pub async fn create_key(&self, by: Option<&Principal>, mut spec: KeySpec) -> EngineResult<CreatedKey> {
        let now = self.clock.now();
        let name = spec.name.trim().to_string();
        if name.chars().count() > 256 {
            return Err(EngineError::invalid("a key's name is at most 256 characters"));
        }
        if spec.namespaces.len() > 100 || spec.name_patterns.len() > 100 {
            return Err(EngineError::invalid(
                "a key lists at most 100 namespaces and 100 name patterns",
            ));
        }
        scope::grant(by, &mut spec)?;
        let namespaces = spec.namespaces;
        for ns in &namespaces {
            if ns != ANY_NAMESPACE && self.store.get_namespace(ns).await?.is_none() {
                return Err(crate::namespaces::not_found(ns));
            }
        }
        for p in &spec.name_patterns {
            let stem = p.strip_suffix('*').unwrap_or(p);
            if stem.contains('*') || (stem.is_empty() && p.is_empty()) {
                return Err(EngineError::invalid(format!(
                    "name pattern {p:?}: a name, or a prefix followed by one trailing *"
                )));
            }
            crate::engine::validate::name("name_patterns", p)?;
        }
        if !spec.name_patterns.is_empty() && spec.role != Role::Worker {
            return Err(EngineError::invalid("name patterns apply to worker keys only"));
        }
        if spec.expires_at.is_some_and(|t| t <= now) {
            return Err(EngineError::invalid("expires_at must be in the future"));
        }
        let made = key::generate();
        let record = ApiKeyRecord {
            key_id: made.key_id,
            secret_sha256: made.secret_sha256,
            name,
            role: spec.role.as_str().to_string(),
            namespaces,
            name_patterns: spec.name_patterns,
            created_at: now,
            expires_at: spec.expires_at,
            revoked_at: None,
        };
        self.store.create_api_key(&record).await?;
        tracing::info!(key_id = %record.key_id, role = %record.role, "API key created");
        Ok(CreatedKey {
            record,
            text: made.text,
        })
    }

    /// The keys `by` manages (every key with authentication off).
    pub async fn list_keys(&self, by: Option<&Principal>) -> EngineResult<Vec<ApiKeyRecord>> {
        let mut keys = self.store.list_api_keys(MAX_LISTED_KEYS).await?;
        if let Some(p) = by {
            keys.retain(|k| p.manages(k));
        }
        Ok(keys)
    }

    /// Revokes a key `by` manages; this replica forgets it at once, the others when their cache
    /// entry ends. A key outside `by`'s namespaces is answered as one that does not exist.
    pub async fn revoke_key(&self, by: Option<&Principal>, key_id: &str) -> EngineResult<bool> {
        crate::engine::validate::name("key_id", key_id)?;
        match self.store.get_api_key(key_id).await? {
            Some(k) if by.is_none_or(|p| p.manages(&k)) => {}
            _ => {
                return Err(EngineError::new(
                    ErrorCode::NotFound,
                    "API_KEY_NOT_FOUND",
                    format!("API key {key_id:?} does not exist among the keys this key manages"),
                ))
            }
        }
        let revoked = self.store.revoke_api_key(key_id, self.clock.now()).await?;
        self.cache.forget(key_id).await;
        tracing::info!(%key_id, revoked, "API key revoked");
        Ok(revoked)
    }

    /// A namespace was deleted: the keys that acted only there are revoked, and the others stop
    /// listing it, so a namespace made later under the same name is not theirs. Returns how many
    /// keys were revoked and how many narrowed.
    pub async fn namespace_deleted(&self, namespace: &str) -> EngineResult<(usize, usize)> {
        let now = self.clock.now();
        let (mut revoked, mut narrowed) = (0, 0);
        for k in self.store.list_api_keys(MAX_LISTED_KEYS).await? {
            if k.revoked_at.is_some() || !k.namespaces.iter().any(|n| n == namespace) {
                continue;
            }
            let rest: Vec<String> = k.namespaces.iter().filter(|n| *n != namespace).cloned().collect();
            if rest.is_empty() {
                self.store.revoke_api_key(&k.key_id, now).await?;
                revoked += 1;
            } else {
                self.store.set_api_key_namespaces(&k.key_id, &rest).await?;
                narrowed += 1;
            }
            self.cache.forget(&k.key_id).await;
        }
        tracing::info!(
            namespace,
            revoked,
            narrowed,
            "keys of a deleted namespace revoked or narrowed"
        );
        Ok((revoked, narrowed))
    }

    /// Makes the first admin key and writes it to `path`, unless `path` exists already (the key
    /// was made at an earlier start). The file is readable by its owner only.
    /// `--admin-key-file`: registers the admin key whose text PATH holds (made by `waymark key
    /// generate`, kept in a secret store), so a deployment can hand its first key to the server
    /// instead of reading one back. Its id taken by another secret refuses the start; a revoked
    /// key stays revoked (a leaked key is never brought back by a restart).
    pub async fn import_admin_key(&self, path: &std::path::Path) -> anyhow::Result<()> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read the admin key in {}: {e}", path.display()))?;
        let presented = key::parse(text.trim()).ok_or_else(|| {
            anyhow::anyhow!(
                "{} does not hold an API key (wmk_<16 hex>_<64 hex>; `waymark key generate` makes one)",
                path.display()
            )
        })?;
        let secret_sha256 = key::hash(presented.secret);
        let existing = |found: Option<ApiKeyRecord>| -> anyhow::Result<bool> {
            match found {
                None => Ok(false),
                Some(k) if !key::matches(presented.secret, &k.secret_sha256) => anyhow::bail!(
                    "the key in {} has the id of another key ({}): generate a new one",
                    path.display(),
                    k.key_id
                ),
                Some(k) => {
                    if k.revoked_at.is_some() {
                        tracing::warn!(key_id = %k.key_id, path = %path.display(),
                            "the admin key file holds a revoked key: it stays revoked");
                    }
                    Ok(true)
                }
            }
        };
        let read = |id: &str| {
            let id = id.to_string();
            async move {
                self.store
                    .get_api_key(&id)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot read the API keys: {e}"))
            }
        };
        if existing(read(presented.key_id).await?)? {
            return Ok(());
        }
        let record = ApiKeyRecord {
            key_id: presented.key_id.to_string(),
            secret_sha256,
            name: "admin key file".into(),
            role: Role::Admin.as_str().to_string(),
            namespaces: vec![ANY_NAMESPACE.into()],
            name_patterns: vec![],
            created_at: self.clock.now(),
            expires_at: None,
            revoked_at: None,
        };
        if let Err(e) = self.store.create_api_key(&record).await {
            // Another replica registered it at the same moment: the same key is fine.
            if existing(read(presented.key_id).await?)? {
                return Ok(());
            }
            anyhow::bail!("cannot register the admin key in {}: {e}", path.display());
        }
        tracing::info!(key_id = %record.key_id, path = %path.display(), "admin key registered from its file");
        Ok(())
    }

    pub async fn bootstrap_admin_key(&self, path: &std::path::Path) -> anyhow::Result<()> {
        if path.exists() {
            return Ok(());
        }
        let now = self.clock.now();
        let live_admin = self
            .store
            .list_api_keys(MAX_LISTED_KEYS)
            .await
            .map_err(|e| anyhow::anyhow!("cannot read the API keys: {e}"))?
            .iter()
            .any(|k| k.role == Role::Admin.as_str() && k.revoked_at.is_none() && k.expires_at.is_none_or(|t| t > now));
        if live_admin {
            // Another admin key would be one more way in that nobody asked for: the holders of
            // the existing ones make more with `waymark key create --role admin`.
            tracing::warn!(path = %path.display(),
                "an admin key exists already: no first admin key made (the file is not written)");
            return Ok(());
        }
        let created = self
            .create_key(
                None,
                KeySpec {
                    name: "bootstrap admin".into(),
                    role: Role::Admin,
                    namespaces: vec![ANY_NAMESPACE.into()],
                    name_patterns: vec![],
                    expires_at: None,
                },
            )
            .await
            .map_err(|e| anyhow::anyhow!("cannot create the first admin key: {e}"))?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut f = options
            .open(path)
            .map_err(|e| anyhow::anyhow!("cannot write the admin key to {}: {e}", path.display()))?;
        std::io::Write::write_all(&mut f, format!("{}\n", created.text).as_bytes())?;
        tracing::info!(key_id = %created.record.key_id, path = %path.display(), "first admin key written");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_patterns_match_exact_names_and_prefixes() {
        assert!(pattern_matches("billing.*", "billing.charge"));
        assert!(pattern_matches("billing.*", "billing."));
        assert!(!pattern_matches("billing.*", "billin"));
        assert!(pattern_matches("charge", "charge"));
        assert!(!pattern_matches("charge", "charge2"));
        let p = Principal {
            key_id: "k".into(),
            role: Role::Worker,
            namespaces: vec!["default".into()],
            name_patterns: vec![],
            expires_at: None,
        };
        assert!(p.may_register("anything"), "no patterns: any name");
        assert!(p.may_act_in("default") && !p.may_act_in("other"));
    }
}
