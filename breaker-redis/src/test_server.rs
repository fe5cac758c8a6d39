//! A redis-server child process for the crate's own unit tests (the protocol against a real
//! server): started on a free loopback port, killed on drop. Without `redis-server` on `PATH`
//! a test is skipped with a notice, unless `REQUIRE_REDIS=1` (CI sets it).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// A fresh server, or `None` (after a notice) when redis-server is missing.
    ///
    /// # Panics
    /// When it is missing and `REQUIRE_REDIS=1`, or does not come up within 10 s.
    pub(crate) fn start() -> Option<Server> {
        let installed = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            if std::env::var("REQUIRE_REDIS").is_ok_and(|v| v == "1") {
                panic!("redis-server was not found on PATH but REQUIRE_REDIS=1");
            }
            eprintln!("notice: redis-server not found on PATH; skipping this test");
            return None;
        }
        for _ in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free loopback port");
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--loglevel", "warning"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            let mut s = Server { child, port };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if s.child.try_wait().ok().flatten().is_some() {
                    break;
                }
                if s.connection().is_some() {
                    return Some(s);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        panic!("redis-server did not start on 3 free ports");
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn connection(&self) -> Option<redis::Connection> {
        let client = redis::Client::open(self.url()).ok()?;
        let mut c = client
            .get_connection_with_timeout(Duration::from_millis(200))
            .ok()?;
        redis::cmd("PING").query::<String>(&mut c).ok()?;
        Some(c)
    }

    /// Runs one command on a connection of its own.
    pub(crate) fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = self.connection().expect("the test server answers");
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut c).expect("the test server's answer")
    }

    /// An async connection (RESP2, no pushes).
    pub(crate) async fn conn(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .expect("the test server's url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the test server")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
