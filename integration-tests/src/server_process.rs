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
    ///
    /// The port is found free and then bound by the server, a moment later: another process
    /// (a client's outgoing connection takes a port from the same range) may take it between
    /// the two. A server that exits saying its port is taken is started again on another.
    pub async fn start_secured(
        db: &TestDatabase,
        extra: &[String],
        tls: bool,
        connect: waymark_sdk::ConnectOptions,
    ) -> ServerProcess {
        let mut attempts = 0;
        loop {
            let port = free_port();
            let addr = format!("{}://127.0.0.1:{port}", if tls { "https" } else { "http" });
            let mut s = ServerProcess {
                connect: connect.clone().server(&addr),
                addr,
                port,
                database_url: db.url.clone(),
                log: db.dir.join(format!("server-{port}.log")),
                extra: extra.to_vec(),
                child: None,
                starts: 0,
            };
            match s.start_once().await {
                Ok(()) => return s,
                Err(log) if attempts < 5 && log.contains("Address already in use") => {
                    attempts += 1;
                    eprintln!("port {port} was taken before the server bound it: another port");
                }
                Err(log) => panic!("the server at {} exited at start:\n{log}", s.addr),
            }
        }
    }

    /// Starts (again) on the same port and database and waits until it answers.
    pub async fn restart(&mut self) {
        if let Err(log) = self.start_once().await {
            panic!("the server at {} exited at start:\n{log}", self.addr);
        }
    }

    /// Starts the process and waits until it answers; `Err` with its log when it exits first.
    async fn start_once(&mut self) -> Result<(), String> {
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
        let child = &mut self.child;
        let answered = wait_for(
            &format!("server at {addr} to answer (log: {})", log.display()),
            Duration::from_secs(60),
            || {
                let connect = connect.clone();
                let exited = child.as_mut().and_then(|c| c.try_wait().ok().flatten()).is_some();
                async move {
                    if exited {
                        return Some(false);
                    }
                    // Bounded: whatever holds the port may accept and never answer, and the
                    // next round must get to see whether the server exited.
                    let ask = async {
                        let c = waymark_sdk::Client::connect_with(&connect).await.ok()?;
                        Some(c.get("readiness-probe").await)
                    };
                    let answer = tokio::time::timeout(Duration::from_secs(2), ask).await.ok().flatten()?;
                    // Any answer from the service itself will do, refusals of the key included.
                    match answer {
                        Err(e)
                            if matches!(
                                e.reason(),
                                Some("WORKFLOW_NOT_FOUND" | "UNAUTHENTICATED" | "PERMISSION_DENIED")
                            ) =>
                        {
                            Some(true)
                        }
                        _ => None,
                    }
                }
            },
        )
        .await;
        if answered {
            Ok(())
        } else {
            self.child = None;
            Err(std::fs::read_to_string(&self.log).unwrap_or_default())
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A port taken before the server binds it is seen as soon as the server exits, with the
    /// reason in its log (which `start_secured` answers by trying another port).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_whose_port_is_taken_is_seen_at_once() {
        let db = TestDatabase::new(Backend::Sqlite).await.unwrap();
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let mut s = ServerProcess {
            connect: waymark_sdk::ConnectOptions::from_env().server(format!("http://127.0.0.1:{port}")),
            addr: format!("http://127.0.0.1:{port}"),
            port,
            database_url: db.url.clone(),
            log: db.dir.join("taken.log"),
            extra: Vec::new(),
            child: None,
            starts: 0,
        };
        let started = std::time::Instant::now();
        let log = s.start_once().await.expect_err("the port is taken");
        assert!(log.contains("Address already in use"), "{log}");
        assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
        // And a server started the usual way finds a port of its own.
        let ok = ServerProcess::start(&db, &[]).await;
        assert_ne!(ok.port, port);
    }
}
