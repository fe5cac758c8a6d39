//! The fleet: [`N`] replicas, either in this process (each with its own store connection and
//! replica id) or each in its own OS process (this test binary run again as a replica: the
//! ignored test [`replica_process`], which the parent starts with its settings in the
//! environment and drives over stdin and stdout).
//!
//! A replica process runs every path, the attribute's included (it installs its store, once
//! per process); replicas in this process run every path but the attribute's (this process
//! can install one store, and each test has its own server).
//!
//! The protocol of a replica process: it prints `@@ready` once its breakers are shared (or
//! `@@error WHAT`), then answers each line of its stdin: `view` with `@@view LINE`
//! ([`View::encode`]), `calls B N` with `@@calls OK FAILED REJECTED`, `close B MS` with
//! `@@closed 0|1`, `quiet 1|0` (its callers pause or go on) with `@@quiet`, `diagnose` with
//! `@@diagnose LINE` ([`Replica::diagnose`]); it ends at `quit` or at the end of its stdin (the parent is gone). Its log
//! lines go to its stderr, which the parent keeps.

use crate::dependency::{self, Dependency, Link, Path};
use crate::replica::{Replica, View};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Replicas in a fleet.
pub const N: usize = 3;

/// Where the replicas run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// Several stores in this process, one connection and replica id each.
    InProcess,
    /// One OS process per replica.
    Processes,
}

impl Topology {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Topology::InProcess => "connections",
            Topology::Processes => "processes",
        }
    }
}

const ENV: &str = "STORE_FAULTS_REPLICA";
/// The test that is a replica process (the parent runs it by this exact name).
const ENTRY: &str = "fleet::replica_process";

/// A replica process, killed on drop.
struct ChildReplica {
    index: usize,
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<String>,
}

impl ChildReplica {
    fn spawn(
        index: usize,
        url: &str,
        ns: &str,
        dep: SocketAddr,
        log: Arc<Mutex<Vec<String>>>,
    ) -> ChildReplica {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut child = Command::new(exe)
            .args([
                ENTRY,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ENV, format!("{index} {url} {ns} {dep}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a replica process");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                // libtest may print the test's name before the first line on the same line.
                if let Some(at) = line.find("@@") {
                    if tx.send(line[at + 2..].to_owned()).is_err() {
                        return;
                    }
                }
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                let mut log = log.lock().unwrap();
                if log.len() < 100_000 {
                    log.push(format!("[r{index}] {line}"));
                }
            }
        });
        ChildReplica {
            index,
            child,
            stdin,
            lines: rx,
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}")
            .and_then(|()| self.stdin.flush())
            .unwrap_or_else(|e| panic!("replica process r{} is gone: {e}", self.index));
    }

    /// The next line that starts with `prefix` (its rest), within `within`.
    async fn expect(&mut self, prefix: &str, within: Duration) -> String {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "replica process r{} did not answer `{prefix}` within {within:?}",
                        self.index
                    )
                })
                .unwrap_or_else(|| panic!("replica process r{} ended", self.index));
            if let Some(e) = line.strip_prefix("error ") {
                panic!("replica process r{} failed: {e}", self.index);
            }
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.trim_start().to_owned();
            }
        }
    }
}

impl Drop for ChildReplica {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

enum Members {
    Local(Vec<Replica>),
    Children(Vec<ChildReplica>),
}

/// The fleet: see the [module docs](self).
pub struct Fleet {
    members: Members,
    log: Arc<Mutex<Vec<String>>>,
    _service: Option<tokio::task::JoinHandle<()>>,
}

impl Fleet {
    /// Starts [`N`] replicas, replica `r` on the store at `urls[r]`, calling `dep`.
    ///
    /// # Panics
    /// If a replica cannot start (its error says why).
    pub async fn start(
        topology: Topology,
        urls: &[String],
        ns: &str,
        dep: &Arc<Dependency>,
    ) -> Fleet {
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        match topology {
            Topology::InProcess => {
                let mut replicas = Vec::new();
                for (r, url) in urls.iter().enumerate().take(N) {
                    let replica = Replica::start(r, url, ns, Link::Local(Arc::clone(dep)), false)
                        .await
                        .unwrap_or_else(|e| panic!("replica r{r}: {e}"));
                    replicas.push(replica);
                }
                Fleet {
                    members: Members::Local(replicas),
                    log,
                    _service: None,
                }
            }
            Topology::Processes => {
                let (addr, service) = dependency::serve(Arc::clone(dep)).await;
                let mut children: Vec<ChildReplica> = urls
                    .iter()
                    .enumerate()
                    .take(N)
                    .map(|(r, url)| ChildReplica::spawn(r, url, ns, addr, Arc::clone(&log)))
                    .collect();
                for c in &mut children {
                    c.expect("ready", Duration::from_secs(30)).await;
                }
                Fleet {
                    members: Members::Children(children),
                    log,
                    _service: Some(service),
                }
            }
        }
    }

    /// The paths every replica runs.
    pub fn paths(&self) -> Vec<Path> {
        match &self.members {
            Members::Local(_) => vec![Path::Plain, Path::Pipe, Path::Conf],
            Members::Children(_) => Path::ALL.to_vec(),
        }
    }

    /// What every replica sees now.
    pub async fn views(&mut self) -> Vec<View> {
        match &mut self.members {
            Members::Local(rs) => rs.iter().map(Replica::view).collect(),
            Members::Children(cs) => {
                for c in cs.iter_mut() {
                    c.send("view");
                }
                let mut out = Vec::new();
                for c in cs.iter_mut() {
                    out.push(View::decode(
                        &c.expect("view", Duration::from_secs(5)).await,
                    ));
                }
                out
            }
        }
    }

    /// `n` calls through breaker `b` on each replica of `rs`, those replicas at once: per
    /// replica of `rs`, (succeeded, failed, rejected).
    pub async fn calls(&mut self, rs: &[usize], b: usize, n: u32) -> Vec<(u32, u32, u32)> {
        match &mut self.members {
            Members::Local(replicas) => {
                futures_util::future::join_all(rs.iter().map(|&r| replicas[r].calls(b, n))).await
            }
            Members::Children(cs) => {
                for &r in rs {
                    cs[r].send(&format!("calls {b} {n}"));
                }
                let mut out = Vec::new();
                for &r in rs {
                    let line = cs[r].expect("calls", Duration::from_secs(10)).await;
                    let v: Vec<u32> = line.split(' ').map(|s| s.parse().unwrap()).collect();
                    out.push((v[0], v[1], v[2]));
                }
                out
            }
        }
    }

    /// Breaker `b` closed on every replica (calls succeed until it is), the replicas at once:
    /// per replica, whether it closed within `within`.
    pub async fn close(&mut self, b: usize, within: Duration) -> Vec<bool> {
        match &mut self.members {
            Members::Local(rs) => {
                futures_util::future::join_all(rs.iter().map(|r| r.close(b, within))).await
            }
            Members::Children(cs) => {
                for c in cs.iter_mut() {
                    c.send(&format!("close {b} {}", within.as_millis()));
                }
                let mut out = Vec::new();
                for c in cs.iter_mut() {
                    out.push(c.expect("closed", within + Duration::from_secs(5)).await == "1");
                }
                out
            }
        }
    }

    /// Every replica's [`Replica::diagnose`] line.
    pub async fn diagnose(&mut self) -> Vec<String> {
        match &mut self.members {
            Members::Local(rs) => rs.iter().map(Replica::diagnose).collect(),
            Members::Children(cs) => {
                for c in cs.iter_mut() {
                    c.send("diagnose");
                }
                let mut out = Vec::new();
                for c in cs.iter_mut() {
                    out.push(c.expect("diagnose", Duration::from_secs(5)).await);
                }
                out
            }
        }
    }

    /// Replica `r`'s callers pause (`true`: no traffic) or call again.
    pub async fn set_quiet(&mut self, r: usize, quiet: bool) {
        match &mut self.members {
            Members::Local(rs) => rs[r].set_quiet(quiet),
            Members::Children(cs) => {
                cs[r].send(&format!("quiet {}", u8::from(quiet)));
                cs[r].expect("quiet", Duration::from_secs(5)).await;
            }
        }
    }

    /// The replica processes' log lines (their stderr), so far.
    pub fn process_log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Stops every replica (bounded).
    pub async fn stop(self) {
        match self.members {
            Members::Local(rs) => {
                for r in rs {
                    r.stop().await;
                }
            }
            Members::Children(cs) => drop(cs),
        }
    }
}

/// Polls the fleet's views (every 2 ms) until `done` holds, for at most `within`: `Ok` with
/// the time it took and the views, or `Err` with the last views.
pub async fn wait_views(
    fleet: &mut Fleet,
    within: Duration,
    mut done: impl FnMut(&[View]) -> bool,
) -> Result<(Duration, Vec<View>), Vec<View>> {
    let start = Instant::now();
    loop {
        let views = fleet.views().await;
        if done(&views) {
            return Ok((start.elapsed(), views));
        }
        if start.elapsed() > within {
            return Err(views);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A replica process (see the [module docs](self)); ignored, so a plain test run skips it:
/// the process fault tests start it with its settings in `STORE_FAULTS_REPLICA`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a replica process: the process fault tests start it themselves"]
async fn replica_process() {
    let Ok(settings) = std::env::var(ENV) else {
        eprintln!("notice: {ENV} is not set: this is a replica process the fault tests start");
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .try_init();
    let f: Vec<&str> = settings.split(' ').collect();
    let (index, url, ns, dep) = (f[0].parse().unwrap(), f[1], f[2], f[3].parse().unwrap());
    let replica = match Replica::start(index, url, ns, Link::Remote(dep), true).await {
        Ok(r) => r,
        Err(e) => {
            println!("@@error {e}");
            return;
        }
    };
    println!("@@ready");
    // Commands from the parent, read on a thread of their own (tokio's stdin is not enabled
    // here); the end of stdin (the parent is gone) ends the process.
    let (tx, mut commands) = mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    while let Some(line) = commands.recv().await {
        let (cmd, arg) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        match cmd {
            "view" => println!("@@view {}", replica.view().encode()),
            "diagnose" => println!("@@diagnose {}", replica.diagnose().replace('\n', " ")),
            "calls" => {
                let (b, n) = arg.split_once(' ').expect("calls B N");
                let (ok, failed, rejected) =
                    replica.calls(b.parse().unwrap(), n.parse().unwrap()).await;
                println!("@@calls {ok} {failed} {rejected}");
            }
            "close" => {
                let (b, ms) = arg.split_once(' ').expect("close B MS");
                let within = Duration::from_millis(ms.parse().unwrap());
                let closed = replica.close(b.parse().unwrap(), within).await;
                println!("@@closed {}", u8::from(closed));
            }
            "quiet" => {
                replica.set_quiet(arg == "1");
                println!("@@quiet");
            }
            "quit" => break,
            other => panic!("a replica process got a command it does not know: {other:?}"),
        }
    }
    replica.stop().await;
}
