//! The harness itself: a server starts, answers, crashes, restarts empty, hangs and resumes;
//! the proxy forwards, delays, blackholes and cuts.

use crate::common::Proxy;
use std::time::{Duration, Instant};

#[test]
fn server_starts_crashes_and_restarts_empty() {
    let mut s = server!();
    let _: () = s.cmd(&["SET", "k", "v"]);
    assert_eq!(s.cmd::<String>(&["GET", "k"]), "v");
    let port = s.port();
    s.kill();
    assert!(redis::Client::open(s.url())
        .unwrap()
        .get_connection_with_timeout(Duration::from_millis(200))
        .is_err());
    s.restart();
    assert_eq!(s.port(), port);
    assert_eq!(
        s.cmd::<Option<String>>(&["GET", "k"]),
        None,
        "restarted empty"
    );
}

#[test]
fn paused_server_hangs_with_the_socket_open() {
    let s = server!();
    let mut conn = s.admin();
    conn.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s.pause();
    let t = Instant::now();
    let r = redis::cmd("PING").query::<String>(&mut conn);
    assert!(r.is_err(), "a stopped server does not answer");
    assert!(t.elapsed() >= Duration::from_millis(250));
    s.resume();
    assert_eq!(s.cmd::<String>(&["PING"]), "PONG");
}

#[tokio::test]
async fn proxy_forwards_delays_blackholes_and_cuts() {
    let s = server!();
    let proxy = Proxy::start(s.port()).await;
    let client = redis::Client::open(proxy.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert_eq!(pong, "PONG");

    proxy.set_latency(Duration::from_millis(60));
    let t = Instant::now();
    let _: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(110),
        "both directions delayed"
    );
    proxy.set_latency(Duration::ZERO);

    proxy.blackhole();
    let r = tokio::time::timeout(
        Duration::from_millis(200),
        redis::cmd("PING").query_async::<String>(&mut conn),
    )
    .await;
    assert!(r.is_err(), "blackholed: no answer");
    proxy.heal();

    proxy.drop_replies();
    let r = tokio::time::timeout(
        Duration::from_millis(200),
        redis::cmd("SET")
            .arg("one-way")
            .arg("1")
            .query_async::<()>(&mut conn),
    )
    .await;
    assert!(r.is_err(), "reply lost");
    assert_eq!(
        s.cmd::<String>(&["GET", "one-way"]),
        "1",
        "but the request ran"
    );

    proxy.cut();
    proxy.heal();
    let mut fresh = client.get_multiplexed_async_connection().await.unwrap();
    let pong: String = redis::cmd("PING").query_async(&mut fresh).await.unwrap();
    assert_eq!(pong, "PONG");
}
