//! A `waymark` server process for a test: started on a free port against a test database,
//! with the flags a test gives (fast recovery, TLS and keys), restarted, killed or stopped.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::{certs, free_port, log_check, wait_for, waymark_bin, Backend, TestDatabase};

/// A server with authentication on (its first admin key made at start) and TLS, with
/// certificates made for the test in `db.dir/certs` (see [`certs`]); its clients trust that
/// CA. Returns the server and the admin key.
pub async fn secured_server(db: &TestDatabase, extra: &[String]) -> (ServerProcess, String) {
    let dir = db.dir.join("certs");
    certs::write(&dir).unwrap();
    let path = |f: &str| dir.join(f).display().to_string();
    let key_file = db.dir.join("admin.key");
    let mut args: Vec<String> = [
        "--auth",
        "--init-admin-key-file",
        &key_file.display().to_string(),
        "--tls-cert",
        &path("server.pem"),
        "--tls-key",
        &path("server.key"),
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().cloned());
    let tls = waymark_sdk::ConnectOptions::from_env().tls_ca_pem(std::fs::read(dir.join("ca.pem")).unwrap());
    let server = ServerProcess::start_secured(db, &args, true, tls).await;
    let admin = std::fs::read_to_string(key_file).unwrap().trim().to_string();
    (server, admin)
}

/// A server with authentication on (no TLS, on loopback) and `extra` flags: the server, its
/// first admin key (of every namespace) and a client holding that key.
pub async fn keyed_server(db: &TestDatabase, extra: &[String]) -> (ServerProcess, String, waymark_sdk::Client) {
    let key_file = db.dir.join("admin.key");
    let mut args: Vec<String> = vec![
        "--auth".into(),
        "--init-admin-key-file".into(),
        key_file.display().to_string(),
    ];
    args.extend(extra.iter().cloned());
    let server = ServerProcess::start_secured(db, &args, false, waymark_sdk::ConnectOptions::from_env()).await;
    let admin_key = std::fs::read_to_string(&key_file).unwrap().trim().to_string();
    let admin = waymark_sdk::Client::connect_with(&server.connect.clone().api_key(&admin_key))
        .await
        .unwrap();
    (server, admin_key, admin)
}

/// A `waymark server` process. Killed with SIGKILL when dropped.
pub struct ServerProcess {
    pub addr: String,
    pub port: u16,
    pub database_url: String,
    pub log: PathBuf,
    extra: Vec<String>,
    child: Option<Child>,
    /// Times started (each appends to `log`).
    starts: usize,
    /// How clients reach it: TLS settings and a key, for a server started with them.
    pub connect: waymark_sdk::ConnectOptions,
}

/// A fresh database and a server on it with [`fast_recovery_args`] and `extra` flags; `None`
/// when the backend is not available here (see [`TestDatabase::new`]).
pub async fn fast_server(backend: Backend, extra: &[&str]) -> Option<(TestDatabase, ServerProcess)> {
    let db = TestDatabase::new(backend).await?;
    let mut args = fast_recovery_args();
    args.extend(extra.iter().map(|s| s.to_string()));
    let server = ServerProcess::start(&db, &args).await;
    Some((db, server))
}

/// Short leases and intervals so recovery happens within a test's patience.
pub fn fast_recovery_args() -> Vec<String> {
    [
        "--worker-lease",
        "1500ms",
        "--heartbeat-interval",
        "200ms",
        "--recovery-grace",
        "300ms",
        "--recovery-interval",
        "100ms",
        "--dispatch-poll-interval",
        "100ms",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

impl ServerProcess {
    pub async fn start(db: &TestDatabase, extra: &[String]) -> ServerProcess {
        Self::start_secured(db, extra, false, waymark_sdk::ConnectOptions::from_env()).await
    }

    /// Starts a server whose clients connect with `connect` (its address is filled in here),
    /// over TLS when `tls` (the flags for it are the caller's, in `extra`).
    pub async fn start_secured(
        db: &TestDatabase,
        extra: &[String],
        tls: bool,
        connect: waymark_sdk::ConnectOptions,
    ) -> ServerProcess {
        let port = free_port();
        let addr = format!("{}://127.0.0.1:{port}", if tls { "https" } else { "http" });
        let mut s = ServerProcess {
            connect: connect.server(&addr),
            addr,
            port,
            database_url: db.url.clone(),
            log: db.dir.join(format!("server-{port}.log")),
            extra: extra.to_vec(),
            child: None,
            starts: 0,
        };
        s.restart().await;
        s
    }

    /// Starts (again) on the same port and database and waits until it answers.
    pub async fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(waymark_bin())
            .arg("server")
            .args([
                "--listen",
                &format!("127.0.0.1:{}", self.port),
                "--database-url",
                &self.database_url,
                // A free port: the usual one beside --listen may be another test's.
                "--console-listen",
                "127.0.0.1:0",
            ])
            .args(&self.extra)
            .env(
                "WAYMARK_LOG",
                std::env::var("WAYMARK_LOG").unwrap_or_else(|_| "info,waymark_server=debug".into()),
            )
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn waymark server");
        self.child = Some(child);
        self.starts += 1;
        let addr = self.addr.clone();
        let log = self.log.clone();
        let connect = self.connect.clone();
        wait_for(
            &format!("server at {addr} to answer (log: {})", log.display()),
            Duration::from_secs(60),
            || {
                let connect = connect.clone();
                async move {
                    let c = waymark_sdk::Client::connect_with(&connect).await.ok()?;
                    // Any answer from the service itself will do, refusals of the key included.
                    match c.get("readiness-probe").await {
                        Err(e)
                            if matches!(
                                e.reason(),
                                Some("WORKFLOW_NOT_FOUND" | "UNAUTHENTICATED" | "PERMISSION_DENIED")
                            ) =>
                        {
                            Some(())
                        }
                        _ => None,
                    }
                }
            },
        )
        .await;
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// kill -9.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then wait for a clean exit; returns the exit status code.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        signal(c.id(), "TERM");
        c.wait().ok()?.code()
    }

    /// Its log, every start's (a killed one's up to the kill): `Err` quoting each panic and each
    /// ERROR line that contains none of `allowed` (substrings of the errors the caller provoked
    /// on purpose), or when the log lacks a start's ready line (see [`log_check::check`]).
    pub fn check_log(&self, allowed: &[&str]) -> Result<(), String> {
        log_check::check(&self.log, self.starts, allowed)
    }

    /// [`check_log`](Self::check_log), failing the test with the lines.
    #[track_caller]
    pub fn assert_log_clean(&self, allowed: &[&str]) {
        if let Err(e) = self.check_log(allowed) {
            panic!("{e}");
        }
    }

    pub async fn client(&self) -> waymark_sdk::Client {
        waymark_sdk::Client::connect_with(&self.connect)
            .await
            .expect("connect client")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends a signal by name (KILL, STOP, CONT, TERM) with the system's `kill`.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "kill -{sig} {pid} failed");
}
