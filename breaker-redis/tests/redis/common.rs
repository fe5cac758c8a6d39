//! The test harness: Redis servers as child processes (start, SIGKILL, SIGSTOP/SIGCONT,
//! restart empty on the same port, replicas) and an in-test TCP proxy (latency, blackhole,
//! one-way loss, cut).

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether a missing server is a failure (`REQUIRE_REDIS=1`) rather than a skip.
pub fn required() -> bool {
    std::env::var("REQUIRE_REDIS").is_ok_and(|v| v == "1")
}

fn server_available() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `Some(())` when tests may use redis-server; `None` (after a notice) to skip.
///
/// # Panics
/// When `redis-server` is missing and `REQUIRE_REDIS=1`.
pub fn available() -> Option<()> {
    if server_available() {
        return Some(());
    }
    if required() {
        panic!(
            "redis-server was not found on PATH but REQUIRE_REDIS=1: \
             install it (apt-get install -y redis-server) or unset REQUIRE_REDIS"
        );
    }
    eprintln!("notice: redis-server not found on PATH; skipping this test (set REQUIRE_REDIS=1 to fail instead)");
    None
}

/// Starts a server or returns from the test (after a notice) when none can be run.
#[macro_export]
macro_rules! server {
    () => {
        match $crate::common::Server::start(&[]) {
            Some(s) => s,
            None => return,
        }
    };
    ($($arg:expr),+ $(,)?) => {
        match $crate::common::Server::start(&[$($arg),+]) {
            Some(s) => s,
            None => return,
        }
    };
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A free loopback port (bound then released; the caller retries if someone takes it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
}

/// A namespace name unique to this test process and call.
pub fn unique_ns(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// One redis-server child process on `127.0.0.1:port`, killed on drop.
pub struct Server {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    tls: bool,
}

impl Server {
    /// Starts a server with extra command-line options; `None` (after a notice) if
    /// redis-server is not installed and `REQUIRE_REDIS` is not set.
    ///
    /// # Panics
    /// If redis-server is installed but does not come up within 10 s (3 ports tried), or is
    /// missing while `REQUIRE_REDIS=1`.
    pub fn start(extra: &[&str]) -> Option<Server> {
        available()?;
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("breaker-redis-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the server's directory");
        let mut server = Server {
            child: None,
            port: 0,
            dir,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            tls: false,
        };
        for _ in 0..3 {
            server.port = free_port();
            if server.spawn() {
                return Some(server);
            }
        }
        panic!(
            "redis-server did not start on 3 free ports; see {}",
            server.dir.display()
        );
    }

    /// Starts a TLS-only server (`--port 0 --tls-port P`) with a certificate for 127.0.0.1
    /// signed by a throw-away CA made by `openssl`; returns it with the CA's certificate (PEM). `None` (after a
    /// notice) when redis-server or openssl is missing, or this redis-server was built
    /// without TLS, unless `REQUIRE_REDIS=1`.
    pub fn start_tls() -> Option<(Server, Vec<u8>)> {
        available()?;
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("breaker-redis-tls-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the server's directory");
        // A CA and a leaf signed by it (webpki refuses a self-signed CA as the server's own).
        std::fs::write(
            dir.join("ext.cnf"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
        )
        .expect("write ext.cnf");
        let openssl = |args: &[&str]| {
            Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let ok = openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=breaker-test-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ]) && openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "key.pem",
            "-out",
            "server.csr",
        ]) && openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "cert.pem",
        ]);
        if !ok {
            if required() {
                panic!("openssl could not make a test certificate but REQUIRE_REDIS=1: install openssl");
            }
            eprintln!("notice: openssl missing; skipping the TLS test");
            return None;
        }
        let d = |f: &str| dir.join(f).to_str().unwrap().to_owned();
        let extra = vec![
            "--tls-cert-file".into(),
            d("cert.pem"),
            "--tls-key-file".into(),
            d("key.pem"),
            "--tls-ca-cert-file".into(),
            d("ca.pem"),
            "--tls-auth-clients".into(),
            "no".into(),
        ];
        let mut server = Server {
            child: None,
            port: 0,
            dir: dir.clone(),
            extra,
            tls: true,
        };
        for _ in 0..3 {
            server.port = free_port();
            if server.spawn() {
                let pem = std::fs::read(dir.join("ca.pem")).unwrap();
                return Some((server, pem));
            }
        }
        if required() {
            panic!(
                "redis-server did not start with TLS (built without it?); see {}",
                dir.display()
            );
        }
        eprintln!("notice: this redis-server does not start with TLS; skipping the TLS test");
        None
    }

    fn spawn(&mut self) -> bool {
        let log = std::fs::File::create(self.dir.join("server.log")).expect("server log");
        let (port, tls_port) = if self.tls {
            (
                "0".to_owned(),
                vec!["--tls-port".to_owned(), self.port.to_string()],
            )
        } else {
            (self.port.to_string(), vec![])
        };
        let child = Command::new("redis-server")
            .args(["--port", &port])
            .args(&tls_port)
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--dir", self.dir.to_str().expect("utf-8 temp dir")])
            .args(["--daemonize", "no", "--loglevel", "warning"])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if child.try_wait().ok().flatten().is_some() {
                    self.child = None;
                    return false;
                }
            }
            if self.ping() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        false
    }

    fn ping(&self) -> bool {
        if self.tls {
            // Up once the TLS port accepts connections.
            return std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok();
        }
        let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)) else {
            return false;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
            return false;
        };
        match redis::cmd("PING").query::<String>(&mut conn) {
            Ok(_) => true,
            // An error reply (NOAUTH with --requirepass) is an answer too: the server is up.
            Err(e) => e.code().is_some(),
        }
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server is running").id()
    }

    /// `redis://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Crash: SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a fresh, empty server on the same port (after [`kill`](Self::kill)).
    ///
    /// # Panics
    /// If it does not come up within 10 s.
    pub fn restart(&mut self) {
        self.kill();
        assert!(
            self.spawn(),
            "redis-server did not restart on port {}",
            self.port
        );
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {sig} failed");
    }

    /// Hang with the socket open: SIGSTOP.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Resume after [`pause`](Self::pause): SIGCONT.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// A blocking admin connection (2 s timeouts).
    pub fn admin(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("client");
        let conn = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("admin connection");
        conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        conn.set_write_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        conn
    }

    /// Runs one command on an admin connection.
    ///
    /// # Panics
    /// If the command fails.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut self.admin())
            .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
    }

    /// Makes this server a replica of `primary` and waits (bounded, 10 s) until it is in sync.
    ///
    /// # Panics
    /// If the link is not up within 10 s.
    pub fn replicate(&self, primary: &Server) {
        let _: String = self.cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let info: String = self.cmd(&["INFO", "replication"]);
            if info.contains("master_link_status:up") {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("replication link did not come up");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_ref() {
            // A paused server would ignore SIGKILL until resumed on some kernels' views of the
            // wait; resume first so the process is reaped promptly.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What the proxy does to bytes, per direction.
#[derive(Default)]
struct ProxyControl {
    /// The server new connections go to.
    upstream: std::sync::atomic::AtomicU16,
    /// Extra delay before forwarding each chunk, microseconds.
    latency_us: AtomicU64,
    /// 0: forward; 1: hold both directions (blackhole, sockets stay open);
    /// 2: drop server -> client bytes (replies lost, requests still executed).
    mode: AtomicU64,
    /// Bumped by `cut`: connections of an older epoch close.
    epoch: AtomicU64,
    forwarded: AtomicU64,
}

/// A TCP proxy on a loopback port in front of a server, for latency, blackhole, one-way loss
/// and cut connections.
pub struct Proxy {
    port: u16,
    control: Arc<ProxyControl>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy to `127.0.0.1:upstream` on the current tokio runtime.
    pub async fn start(upstream: u16) -> Proxy {
        use tokio::net::{TcpListener, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().unwrap().port();
        let control = Arc::new(ProxyControl::default());
        control.upstream.store(upstream, Ordering::Release);
        let ctl = Arc::clone(&control);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let to = ctl.upstream.load(Ordering::Acquire);
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)).await else {
                    continue;
                };
                let epoch = ctl.epoch.load(Ordering::Acquire);
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pump(cr, sw, Arc::clone(&ctl), epoch, false));
                tokio::spawn(pump(sr, cw, Arc::clone(&ctl), epoch, true));
            }
        });
        Proxy {
            port,
            control,
            task,
        }
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:proxy-port/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Delay every forwarded chunk by `d` (zero: none).
    pub fn set_latency(&self, d: Duration) {
        self.control
            .latency_us
            .store(d.as_micros() as u64, Ordering::Release);
    }

    /// Hold all bytes in both directions, sockets open.
    pub fn blackhole(&self) {
        self.control.mode.store(1, Ordering::Release);
    }

    /// Drop every byte from the server to the client: requests still run, replies are lost.
    pub fn drop_replies(&self) {
        self.control.mode.store(2, Ordering::Release);
    }

    /// Back to plain forwarding (held bytes are delivered).
    pub fn heal(&self) {
        self.control.mode.store(0, Ordering::Release);
    }

    /// Sends new connections to another server (a failover), closing the open ones.
    pub fn switch_to(&self, upstream: u16) {
        self.control.upstream.store(upstream, Ordering::Release);
        self.cut();
    }

    /// Closes every open connection (new ones are accepted).
    pub fn cut(&self) {
        self.control.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Bytes forwarded so far, both directions.
    pub fn forwarded(&self) -> u64 {
        self.control.forwarded.load(Ordering::Acquire)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.control.epoch.fetch_add(1, Ordering::AcqRel);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    ctl: Arc<ProxyControl>,
    epoch: u64,
    is_reply: bool,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    let tick = Duration::from_millis(5);
    loop {
        if ctl.epoch.load(Ordering::Acquire) != epoch {
            return;
        }
        let n = match tokio::time::timeout(tick, from.read(&mut buf)).await {
            Err(_) => continue,
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(n)) => n,
        };
        // Held while blackholed (bounded by the test's own time limit), re-checking the cut.
        while ctl.mode.load(Ordering::Acquire) == 1 {
            if ctl.epoch.load(Ordering::Acquire) != epoch {
                return;
            }
            tokio::time::sleep(tick).await;
        }
        if is_reply && ctl.mode.load(Ordering::Acquire) == 2 {
            continue;
        }
        let lat = ctl.latency_us.load(Ordering::Acquire);
        if lat > 0 {
            tokio::time::sleep(Duration::from_micros(lat)).await;
        }
        if ctl.epoch.load(Ordering::Acquire) != epoch {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
        ctl.forwarded.fetch_add(n as u64, Ordering::AcqRel);
    }
}

/// Waits (bounded, 3 s) until `cond` holds; returns how long it took.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    start.elapsed()
}
