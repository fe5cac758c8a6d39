//! One fault, from a healthy fleet to a fleet that decides together again, and what it cost.
//!
//! The scenario, the same for every fault and both topologies (3 replicas, every path):
//!
//! 1. **Ready**: every replica's store healthy, every breaker closed; callers run on every
//!    breaker of every replica from here to the end.
//! 2. **Before the fault** (a baseline: the fleet works): the fleet failure-rate rule trips
//!    every replica (3 failures on each replica, 9 in the fleet: no replica trips alone); a
//!    config file's `scope = "quorum(2)"` opens no other replica on r0's trip and every
//!    replica on r1's; then a trip on r0 (3 consecutive failures on each path) opens every
//!    replica.
//! 3. **The fault** ([`Env::inject`]), from [`FAULT_LEAD`] before the fleet's cooldown ends:
//!    it hits an open fleet as it goes half-open, so its deadline, its lease requests and
//!    its probes are in play. The dependency is healthy from the trip on. Replica r2 has no
//!    traffic from the fault's start until its store reads healthy again (a quiet replica,
//!    as behind an uneven load balancer): its breakers are still open then, and must follow
//!    the fleet.
//! 4. **At the fault's end**, the sentinel breakers (closed everywhere) trip on r1: the time
//!    from the fault's end until every replica rejects on every path is the time until every
//!    replica decides with the fleet again (it includes the 3 failing calls, ~25 ms).
//! 5. **Every rule works again**: the main breakers close everywhere (the dependency is
//!    healthy); a trip on r2 reaches every other replica within one flush interval (plus a
//!    margin for the machine); the fleet rate rule trips every replica again within one flush
//!    interval of the last failure (plus a margin); quorum(2) works as before, its second
//!    trip reaching every replica within the same bound; and everything closes again.
//!    (A count window has no fleet-wide order: the fleet's rules here are the consecutive
//!    rule, the time window's failure rate and the quorum.)
//!
//! What it counts (the README's figures), with the expectations asserted by the tests:
//! - **calls failed because of the store**: rejections on a main or sentinel breaker more
//!   than [`GRACE`] after its dependency was last failing (the cooldown, a probe, the store's
//!   own breaker and a flush fit in it): with `on_error = local` and a healthy dependency,
//!   none;
//! - **probes above the cap** (1): among probes started while the store is healthy, none;
//!   counting the probes started during the fault (until every replica's store reads
//!   healthy, plus two flush intervals), at most the documented store-loss bound: each
//!   degraded replica's local probe, plus the cap twice (the leases lost with the state);
//! - **time from the fault's end until every replica decides with the fleet again** (step 4),
//!   at most [`AGREE_BOUND`].

use crate::common::unique_ns;
use crate::dependency::{index, Dependency, Path, Role, BREAKERS};
use crate::fault::{Env, Fault};
use crate::fleet::{wait_views, Fleet, Topology};
use crate::replica::{View, COOLDOWN, FLUSH, RATE_MIN_CALLS, STORE_COOLDOWN_MAX, THRESHOLD};
use breaker_core::breaker::State;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// After its dependency was last failing, a breaker's rejections are the store's doing once
/// this has passed: the cooldown, and 700 ms for a probe, the store's own breaker to notice a
/// dead store (3 operations of 100 ms) and a flush.
pub const GRACE: Duration = Duration::from_millis(COOLDOWN.as_millis() as u64 + 700);
/// From the fault's end until every replica decides with the fleet again: the store's own
/// breaker's longest cooldown (it must notice the store is back), two flush intervals, and
/// 250 ms for the 3 failing calls of the trip and the machine.
pub const AGREE_BOUND: Duration = Duration::from_millis(
    STORE_COOLDOWN_MAX.as_millis() as u64 + 2 * FLUSH.as_millis() as u64 + 250,
);
/// After the fault, from a replica's trip until every other replica rejects: one flush
/// interval, and 150 ms for the machine.
pub const TRIP_BOUND: Duration = Duration::from_millis(FLUSH.as_millis() as u64 + 150);
/// After the fault, from the last failure of a fleet-rate trip until every replica rejects:
/// one flush interval (the counts are flushed within it), and 150 ms for the machine.
pub const RATE_BOUND: Duration = Duration::from_millis(FLUSH.as_millis() as u64 + 150);
/// The fault starts this long before the fleet's cooldown ends (after the trip on r0).
pub const FAULT_LEAD: Duration = Duration::from_millis(60);
/// The replica with no traffic during the fault.
pub const QUIET: usize = 2;
/// When the quiet replica's traffic comes back, its open breakers may need one probe (30 ms)
/// and a lease's round trip: its rejections meanwhile are its own half-open period's.
pub const QUIET_RESUME: Duration = Duration::from_millis(250);
/// The probe cap of every breaker.
pub const CAP: u64 = 1;

/// What one fault cost, and every expectation it broke.
#[derive(Debug)]
pub struct Outcome {
    /// The fault.
    pub fault: Fault,
    /// Where the replicas ran.
    pub topology: Topology,
    /// Calls that reached the dependency (every breaker, every replica).
    pub calls: u64,
    /// Calls failed because of the store (every main and sentinel breaker, every replica).
    pub store_failed: u64,
    /// Most probes in flight above the cap, among probes started while the store was healthy.
    pub over_cap_healthy: u64,
    /// Most probes in flight above the cap, all probes (those of the fault included).
    pub over_cap_all: u64,
    /// The documented store-loss bound for this fault, above the cap.
    pub over_cap_bound: u64,
    /// From the fault's end until every replica rejected after the sentinels' trip (the
    /// slowest path); `None`: not within 5 s.
    pub agree: Option<Duration>,
    /// After the fault, from r2's trip until every replica rejected (the slowest path).
    pub trip_after: Option<Duration>,
    /// After the fault, from the last failure of a fleet-rate trip until every replica rejected.
    pub rate_after: Option<Duration>,
    /// After the fault, from the second replica's trip under `quorum(2)` until every replica
    /// rejected.
    pub quorum_after: Option<Duration>,
    /// What happened when, from the dependency's start.
    pub timeline: Vec<(String, Duration)>,
    /// Every broken expectation, in words.
    pub violations: Vec<String>,
}

impl Outcome {
    fn new(fault: Fault, topology: Topology) -> Outcome {
        Outcome {
            fault,
            topology,
            calls: 0,
            store_failed: 0,
            over_cap_healthy: 0,
            over_cap_all: 0,
            over_cap_bound: CAP * (fault.degraded_replicas() as u64 + 1),
            agree: None,
            trip_after: None,
            rate_after: None,
            quorum_after: None,
            timeline: Vec::new(),
            violations: Vec::new(),
        }
    }

    /// The README's row: fault, replicas, calls failed because of the store (of the calls
    /// made), probes above the cap (store healthy / all, and the bound), fault's end to every
    /// replica with the fleet, and the three checks after it (a trip, the fleet rate,
    /// quorum(2)), each the time until every replica rejected.
    pub fn row(&self) -> String {
        let ms = |d: Option<Duration>| {
            d.map_or("never".to_owned(), |d| {
                format!("{:.0} ms", d.as_secs_f64() * 1e3)
            })
        };
        format!(
            "| {} | {} | {} of {} | {} / +{} (bound +{}) | {} | {} / {} / {} |",
            self.fault.describe(),
            self.topology.name(),
            self.store_failed,
            self.calls,
            self.over_cap_healthy,
            self.over_cap_all,
            self.over_cap_bound,
            ms(self.agree),
            ms(self.trip_after),
            ms(self.rate_after),
            ms(self.quorum_after),
        )
    }

    /// Everything, for a failed test's message.
    pub fn report(&self) -> String {
        let mut s = format!(
            "{} ({} replicas): {}\n",
            self.fault.slug(),
            self.topology.name(),
            self.row()
        );
        for (what, at) in &self.timeline {
            let _ = writeln!(s, "  at {:>7.1} ms: {what}", at.as_secs_f64() * 1e3);
        }
        for v in &self.violations {
            let _ = writeln!(s, "  - {v}");
        }
        s
    }
}

struct Run {
    fleet: Fleet,
    dep: Arc<Dependency>,
    paths: Vec<Path>,
    outcome: Outcome,
    /// The fault was done (the fleet worked before it).
    faulted: bool,
}

impl Run {
    fn mark(&mut self, what: impl Into<String>) {
        let at = self.dep.elapsed();
        self.outcome.timeline.push((what.into(), at));
    }

    fn violation(&mut self, what: impl Into<String>) {
        self.outcome.violations.push(what.into());
    }

    fn of(&self, role: Role) -> Vec<usize> {
        self.paths.iter().map(|p| index(*p, role)).collect()
    }

    /// Every breaker of `bs` reads `state` on every replica.
    fn all(views: &[View], bs: &[usize], state: State) -> bool {
        bs.iter()
            .all(|&b| views.iter().all(|v| v.states[b] == Some(state)))
    }

    /// The fleet rate rule: every replica's rate breaker closed, then 3 failing calls on each
    /// replica (9 in the fleet, the rule's minimum; 3 on each is below it), then every
    /// replica's rate breaker must open. `Ok`: the time from the last failure until it did.
    async fn rate_trip(&mut self) -> Result<Duration, String> {
        let b = index(Path::Plain, Role::Rate);
        self.close_everywhere(b).await?;
        let n = crate::fleet::N;
        let each = RATE_MIN_CALLS / n as u32;
        for r in 0..n {
            self.dep.fail(r, b);
        }
        let all: Vec<usize> = (0..n).collect();
        let done = self.fleet.calls(&all, b, each).await;
        let last = Instant::now();
        for r in 0..n {
            self.dep.heal(r, b, Duration::ZERO);
        }
        self.dep.never_count(b);
        if let Some((r, d)) = done.iter().enumerate().find(|(_, d)| d.1 != each) {
            return Err(format!(
                "r{r}'s {each} calls through the rate breaker: {} succeeded, {} failed, {} \
                 rejected (all {each} should have reached the failing dependency)",
                d.0, d.1, d.2
            ));
        }
        match wait_views(&mut self.fleet, Duration::from_secs(3), |vs| {
            vs.iter().all(|v| v.states[b] == Some(State::Open))
        })
        .await
        {
            Ok(_) => Ok(last.elapsed()),
            Err(views) => Err(format!(
                "the fleet rate rule ({} failures of {} calls in the fleet) did not open every \
                 replica within 3 s: rate breaker states {:?}; the replicas:\n    {}",
                each * n as u32,
                each * n as u32,
                views.iter().map(|v| v.states[b]).collect::<Vec<_>>(),
                self.fleet.diagnose().await.join("\n    ")
            )),
        }
    }

    /// Breaker `b` closed on every replica (calls succeed until it is, 3 s at most).
    async fn close_everywhere(&mut self, b: usize) -> Result<(), String> {
        let closed = self.fleet.close(b, Duration::from_secs(3)).await;
        match closed.iter().position(|c| !c) {
            Some(r) => Err(format!(
                "the {} breaker of r{r} did not close within 3 s with a healthy dependency",
                BREAKERS[b].name
            )),
            None => Ok(()),
        }
    }

    /// [`THRESHOLD`] failing calls through breaker `b` on replica `r`: `Ok` with when the last
    /// one ended, if all reached the (failing) dependency.
    async fn trip_on(&mut self, r: usize, b: usize) -> Result<Instant, String> {
        self.dep.fail(r, b);
        let done = self.fleet.calls(&[r], b, THRESHOLD).await[0];
        let last = Instant::now();
        self.dep.heal(r, b, Duration::ZERO);
        self.dep.never_count(b);
        if done.1 == THRESHOLD {
            Ok(last)
        } else {
            Err(format!(
                "r{r}'s {THRESHOLD} calls through the {} breaker: {} succeeded, {} failed, {} \
                 rejected (all should have reached the failing dependency)",
                BREAKERS[b].name, done.0, done.1, done.2
            ))
        }
    }

    /// The quorum rule (a config file's `scope = "quorum(2)"`): every replica's quorum breaker
    /// closed; a trip on r0 (3 failing calls) opens r0 only; a trip on r1 then opens every
    /// replica. `Ok`: the time from r1's last failure until r2 rejected.
    async fn quorum_trip(&mut self) -> Result<Duration, String> {
        let b = index(Path::Conf, Role::Quorum);
        self.close_everywhere(b).await?;
        self.trip_on(0, b).await?;
        tokio::time::sleep(2 * FLUSH).await;
        let views = self.fleet.views().await;
        let states: Vec<Option<State>> = views.iter().map(|v| v.states[b]).collect();
        if states[0] != Some(State::Open) || states[1..].iter().any(|s| *s != Some(State::Closed)) {
            return Err(format!(
                "quorum(2): a trip on r0 alone must open r0 and no other replica; states {states:?}"
            ));
        }
        let last = self.trip_on(1, b).await?;
        match wait_views(&mut self.fleet, Duration::from_secs(3), |vs| {
            vs.iter().all(|v| v.states[b] == Some(State::Open))
        })
        .await
        {
            Ok(_) => Ok(last.elapsed()),
            Err(views) => Err(format!(
                "quorum(2): trips on r0 and r1 did not open every replica within 3 s: quorum \
                 breaker states {:?}",
                views.iter().map(|v| v.states[b]).collect::<Vec<_>>()
            )),
        }
    }

    /// Trips the breakers `bs` on replica `r` (its dependency fails), then heals them; per
    /// breaker, the time from `from` (or, if `None`, from `r`'s own trip) until every replica
    /// rejected, within `within`.
    async fn trip_reaches_all(
        &mut self,
        r: usize,
        bs: &[usize],
        from: Option<Instant>,
        within: Duration,
    ) -> (Vec<Option<Instant>>, Vec<Option<Duration>>) {
        for &b in bs {
            self.dep.fail(r, b);
        }
        let start = Instant::now();
        let mut local: Vec<Option<Instant>> = vec![None; bs.len()];
        let mut reach: Vec<Option<Duration>> = vec![None; bs.len()];
        while reach.iter().any(Option::is_none) && start.elapsed() < within {
            let views = self.fleet.views().await;
            let now = Instant::now();
            for (i, &b) in bs.iter().enumerate() {
                if local[i].is_none() && views[r].states[b] == Some(State::Open) {
                    local[i] = Some(now);
                }
                if reach[i].is_none() && views.iter().all(|v| v.states[b] == Some(State::Open)) {
                    let since = from.or(local[i]).unwrap_or(now);
                    reach[i] = Some(now.saturating_duration_since(since));
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        for &b in bs {
            self.dep.heal(r, b, crate::scenario::GRACE);
        }
        (local, reach)
    }

    async fn wait_closed(&mut self, what: &str) {
        let bs: Vec<usize> = self
            .of(Role::Main)
            .into_iter()
            .chain(self.of(Role::Sentinel))
            .collect();
        let within = GRACE + Duration::from_secs(3);
        if let Err(views) = wait_views(&mut self.fleet, within, |vs| {
            Self::all(vs, &bs, State::Closed)
        })
        .await
        {
            let v = describe(&views, &bs);
            self.violation(format!(
                "{what}: the breakers did not all close within {within:?} with a healthy \
                 dependency: {v}"
            ));
        }
    }
}

/// Each replica's store health and the states of `bs`.
fn describe(views: &[View], bs: &[usize]) -> String {
    views
        .iter()
        .enumerate()
        .map(|(r, v)| {
            let states: Vec<String> = bs
                .iter()
                .map(|&b| format!("{}={:?}", BREAKERS[b].name, v.states[b]))
                .collect();
            format!(
                "r{r} (store {}): {}",
                if v.healthy { "healthy" } else { "degraded" },
                states.join(" ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Runs `fault` against a fleet of `topology`; `None` (after a notice) without redis-server.
/// `log` gives the log lines of this process (replicas in this process log here).
pub async fn run(
    fault: Fault,
    topology: Topology,
    log: impl Fn() -> Vec<String>,
) -> Option<Outcome> {
    let ns = unique_ns(&format!("sf-{}", fault.slug()));
    let mut env = Env::start(fault, &ns).await?;
    let dep = Dependency::new();
    let fleet = Fleet::start(topology, &env.urls(), &ns, &dep).await;
    let paths = fleet.paths();
    let mut run = Run {
        fleet,
        dep: Arc::clone(&dep),
        paths,
        outcome: Outcome::new(fault, topology),
        faulted: false,
    };
    let rate = index(Path::Plain, Role::Rate);
    dep.never_count(rate);
    let every: Vec<usize> = run
        .of(Role::Main)
        .into_iter()
        .chain(run.of(Role::Sentinel))
        .collect();
    if let Err(views) = wait_views(&mut run.fleet, Duration::from_secs(10), |vs| {
        vs.iter().all(|v| v.healthy) && Run::all(vs, &every, State::Closed)
    })
    .await
    {
        panic!(
            "the fleet did not start healthy and closed: {}",
            describe(&views, &every)
        );
    }
    run.mark("ready");
    scenario(&mut run, &mut env, fault).await;
    let mut lines = log();
    lines.extend(run.fleet.process_log());
    finish(&mut run, fault, lines, &ns);
    let Run { fleet, outcome, .. } = run;
    fleet.stop().await;
    Some(outcome)
}

async fn scenario(run: &mut Run, env: &mut Env, fault: Fault) {
    // 2. Before the fault: the fleet works.
    if let Err(e) = run.rate_trip().await {
        run.violation(format!("before the fault (the fleet itself): {e}"));
        return;
    }
    run.mark("before the fault: the fleet rate rule tripped every replica");
    if let Err(e) = run.quorum_trip().await {
        run.violation(format!("before the fault (the fleet itself): {e}"));
        return;
    }
    run.mark("before the fault: quorum(2) tripped every replica");
    env.prepare(fault).await;
    let mains = run.of(Role::Main);
    let (tripped, reach) = run
        .trip_reaches_all(0, &mains, None, Duration::from_secs(2))
        .await;
    if reach.iter().any(Option::is_none) {
        let views = run.fleet.views().await;
        let v = describe(&views, &mains);
        run.violation(format!(
            "before the fault (the fleet itself): a trip on r0 did not open every replica \
             within 2 s: {v}"
        ));
        return;
    }
    run.mark("before the fault: a trip on r0 opened every replica");

    // 3. The fault, from just before the fleet's cooldown ends: the half-open moment, its
    //    lease requests and probes fall within it.
    let tripped = tripped.iter().flatten().min().copied().expect("r0 tripped");
    tokio::time::sleep_until((tripped + COOLDOWN - FAULT_LEAD).into()).await;
    run.dep.set_fault_window(true);
    run.fleet.set_quiet(QUIET, true).await;
    run.mark(format!(
        "fault begins: {}; r{QUIET} quiet",
        fault.describe()
    ));
    let end = env.inject(fault).await;
    run.faulted = true;
    run.mark("fault ends");

    // 4. The sentinels trip on r1 at the fault's end.
    let sentinels = run.of(Role::Sentinel);
    let deadline = Duration::from_secs(5);
    let (_, reach) = run
        .trip_reaches_all(1, &sentinels, Some(end), deadline)
        .await;
    let healthy = wait_views(
        &mut run.fleet,
        deadline.saturating_sub(end.elapsed()),
        |vs| vs.iter().all(|v| v.healthy),
    )
    .await;
    match &healthy {
        Ok(_) => run.mark("every replica's store reads healthy"),
        Err(views) => {
            let v = describe(views, &sentinels);
            run.violation(format!(
                "a replica's store did not read healthy within 5 s of the fault's end: {v}"
            ));
        }
    }
    // Probes started from here on are held to the cap; the quiet replica's traffic is back.
    tokio::time::sleep(2 * FLUSH).await;
    run.dep.set_fault_window(false);
    for &b in &mains {
        run.dep.quiet_for(QUIET, b, QUIET_RESUME);
    }
    run.fleet.set_quiet(QUIET, false).await;
    run.mark("fault window closed (probes held to the cap from here); r2's traffic back");
    if reach.iter().all(Option::is_some) {
        run.outcome.agree = reach.iter().flatten().max().copied();
    }
    for (i, r) in reach.iter().enumerate() {
        let path = run.paths[i].name();
        match r {
            None => run.violation(format!(
                "{path}: a trip on r1 at the fault's end did not reach every replica within 5 s"
            )),
            Some(d) if *d > AGREE_BOUND => run.violation(format!(
                "{path}: a trip on r1 at the fault's end reached every replica after {d:?} \
                 (bound {AGREE_BOUND:?})"
            )),
            Some(_) => {}
        }
    }

    // 5. Every rule works again.
    run.wait_closed("after the fault").await;
    run.mark("after the fault: every main and sentinel breaker closed");
    let (_, reach) = run
        .trip_reaches_all(2, &mains, None, Duration::from_secs(3))
        .await;
    run.mark("after the fault: a trip on r2");
    if reach.iter().all(Option::is_some) {
        run.outcome.trip_after = reach.iter().flatten().max().copied();
    }
    for (i, r) in reach.iter().enumerate() {
        let path = run.paths[i].name();
        match r {
            None => run.violation(format!(
                "{path}: after the fault, a trip on r2 did not reach every replica within 3 s"
            )),
            Some(d) if *d > TRIP_BOUND => run.violation(format!(
                "{path}: after the fault, a trip on r2 reached every replica after {d:?} \
                 (bound {TRIP_BOUND:?})"
            )),
            Some(_) => {}
        }
    }
    match run.rate_trip().await {
        Ok(d) => {
            run.outcome.rate_after = Some(d);
            run.mark("after the fault: the fleet rate rule tripped every replica");
            if d > RATE_BOUND {
                run.violation(format!(
                    "after the fault, the fleet rate rule opened every replica {d:?} after the \
                     last failure (bound {RATE_BOUND:?})"
                ));
            }
        }
        Err(e) => run.violation(format!("after the fault: {e}")),
    }
    match run.quorum_trip().await {
        Ok(d) => {
            run.outcome.quorum_after = Some(d);
            run.mark("after the fault: quorum(2) tripped every replica");
            if d > TRIP_BOUND {
                run.violation(format!(
                    "after the fault, quorum(2)'s second trip opened every replica after {d:?} \
                     (bound {TRIP_BOUND:?})"
                ));
            }
        }
        Err(e) => run.violation(format!("after the fault: {e}")),
    }
    run.wait_closed("at the end").await;
    run.mark("end: every main and sentinel breaker closed");
}

/// The figures from the dependency's counts, and the expectations on them.
fn finish(run: &mut Run, fault: Fault, log: Vec<String>, ns: &str) {
    let mut failed = Vec::new();
    for b in run.of(Role::Main).into_iter().chain(run.of(Role::Sentinel)) {
        let c = run.dep.counts(b);
        run.outcome.store_failed += c.store_failed;
        if c.store_failed > 0 {
            let (first, r) = c.first_store_failed.expect("a first one");
            let last = c.last_store_failed.expect("a last one");
            failed.push(format!(
                "{} ({}): {} of {} rejections, from {:.1} ms (r{r}) to {:.1} ms",
                BREAKERS[b].name,
                BREAKERS[b].path.name(),
                c.store_failed,
                c.rejected,
                first.as_secs_f64() * 1e3,
                last.as_secs_f64() * 1e3,
            ));
        }
    }
    if !failed.is_empty() {
        let n = run.outcome.store_failed;
        run.violation(format!(
            "{n} calls failed because of the store (rejected more than {GRACE:?} after the \
             dependency's last failure): {}",
            failed.join("; ")
        ));
    }
    let mut healthy = 0;
    let mut all = 0;
    for (b, spec) in BREAKERS.iter().enumerate() {
        if !run.paths.contains(&spec.path) {
            continue;
        }
        let c = run.dep.counts(b);
        run.outcome.calls += c.calls;
        healthy = healthy.max(c.max_probes_healthy);
        all = all.max(c.max_probes_all);
        if c.max_probes_healthy > CAP {
            run.outcome.violations.push(format!(
                "{}: {} probes in flight at once while the store was healthy (cap {CAP})",
                spec.name, c.max_probes_healthy
            ));
        }
        if c.max_probes_all > CAP + run.outcome.over_cap_bound {
            run.outcome.violations.push(format!(
                "{}: {} probes in flight at once (the documented store-loss bound for this \
                 fault is {})",
                spec.name,
                c.max_probes_all,
                CAP + run.outcome.over_cap_bound
            ));
        }
    }
    // (Unless the fleet failed before the fault: the scenario stopped there.)
    if healthy == 0 && run.faulted {
        run.violation(
            "no probe ran while the store was healthy: the scenario did not exercise the cap",
        );
    }
    run.outcome.over_cap_healthy = healthy.saturating_sub(CAP);
    run.outcome.over_cap_all = all.saturating_sub(CAP);
    if fault.says_authentication_failed() && run.faulted {
        let ours: Vec<&String> = log.iter().filter(|l| l.contains(ns)).collect();
        if !ours
            .iter()
            .any(|l| l.to_ascii_lowercase().contains("authentication failed"))
        {
            run.violation(format!(
                "no log line of the namespace says the authentication failed; its lines: {ours:?}"
            ));
        }
    }
}
