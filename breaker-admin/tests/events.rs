//! The event stream's bounds, against a real server on loopback: a reader that stops reading
//! loses events and is told how many, while publishing goes on; a thousand readers at once
//! hold a bounded amount of memory, one more is refused, and calls go on.

mod common;

use breaker::breaker::{BreakerPolicy, CircuitBreaker};
use breaker_admin::Admin;
use common::{rss_bytes, DEADLINE};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const HOUR: Duration = Duration::from_secs(3600);

fn breaker(name: &str) -> CircuitBreaker {
    CircuitBreaker::builder(BreakerPolicy::default())
        .name(name)
        .totals(true)
        .build()
        .unwrap()
}

/// Opens an event stream on `stream` and reads until its `hello` event.
async fn open_stream(mut stream: TcpStream, addr: SocketAddr) -> TcpStream {
    stream
        .write_all(format!("GET /api/v1/events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).contains("event: hello") {
        let n = tokio::time::timeout(DEADLINE, stream.read(&mut buf))
            .await
            .expect("hello within the deadline")
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    stream
}

/// The sampler's task never takes a reading before its first interval has passed, however late
/// the runtime starts it: a reading it took then would publish, and count, the events of the
/// program's own `sample_now` (a CI run of the test below saw `sample_now` return 0 so).
#[tokio::test(start_paused = true)]
async fn the_sampler_task_reads_nothing_before_its_first_interval() {
    let b = breaker("early");
    let admin = Admin::builder()
        .annotated(false)
        .breaker(&b)
        .sample_every(HOUR)
        .build();
    b.force_open();
    // The sampler's task runs now, on this one thread (the paused clock stays where it is).
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        admin.sample_now(),
        1,
        "the transition is this call's to publish"
    );
    tokio::time::sleep(HOUR / 2).await;
    b.reset();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        admin.sample_now(),
        1,
        "half an interval: still no reading of the task's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_reading_loses_events_is_told_and_never_holds_up_publishing() {
    let b = breaker("toggled");
    let admin = Admin::builder()
        .annotated(false)
        .breaker(&b)
        .sample_every(HOUR)
        .event_buffer(64)
        .build();
    let server = admin.listen().await.unwrap();
    let addr = server.local_addr();
    // A reader with a small receive window, which then reads nothing.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(addr).await.unwrap();
    let mut stream = open_stream(stream, addr).await;
    admin.sample_now();
    // 16,000 transitions (about 3.6 MB of events), far more than the ring (64) and the
    // connection's buffers hold: each publish returns at once.
    const ROUNDS: u32 = 8_000;
    for _ in 0..ROUNDS {
        b.force_open();
        assert_eq!(admin.sample_now(), 1);
        b.reset();
        assert_eq!(admin.sample_now(), 1);
    }
    // The last event is the only one into forced-closed.
    b.force_closed();
    admin.sample_now();
    // Now read it all: what arrives, plus what the `dropped` events count, is every event.
    let mut text = String::new();
    let mut buf = vec![0u8; 64 * 1024];
    while !text.contains("\"to\":\"forced-closed\"") {
        let n = tokio::time::timeout(DEADLINE, stream.read(&mut buf))
            .await
            .expect("the stream goes on within the deadline")
            .unwrap();
        assert!(n > 0, "the server closed the stream");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let received = text.matches("event: transition\n").count() as u64;
    let dropped: u64 = text
        .match_indices("\"dropped\":")
        .map(|(i, m)| {
            let rest = &text[i + m.len()..];
            let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap();
            rest[..end].parse::<u64>().unwrap()
        })
        .sum();
    assert!(dropped > 0, "the reader fell behind, so it lost events");
    assert!(
        text.contains("this reader fell behind: "),
        "the reader is told in words"
    );
    assert_eq!(
        received + dropped,
        2 * u64::from(ROUNDS) + 1,
        "every event was either received or counted as dropped"
    );
    println!("received {received}, dropped {dropped}");
    assert!(received < 2 * u64::from(ROUNDS), "received {received}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_readers_hold_bounded_memory_one_more_is_refused_and_calls_go_on() {
    // Each reader is two sockets in this process (client and server).
    let b = breaker("busy");
    let admin = Admin::builder()
        .annotated(false)
        .breaker(&b)
        .sample_every(HOUR)
        .max_event_readers(1000)
        .build();
    let server = admin.listen().await.unwrap();
    let addr = server.local_addr();
    // Warm up: the first connection's allocations are not a reader's cost.
    drop(open_stream(TcpStream::connect(addr).await.unwrap(), addr).await);
    let before = rss_bytes();
    let mut readers = Vec::with_capacity(1000);
    for batch in 0..10 {
        let opened = futures_util::future::join_all((0..100).map(|_| async move {
            open_stream(TcpStream::connect(addr).await.unwrap(), addr).await
        }))
        .await;
        readers.extend(opened);
        let _ = batch;
    }
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while admin.event_readers() < 1000 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} readers",
            admin.event_readers()
        );
        tokio::task::yield_now().await;
    }
    let grown = rss_bytes().saturating_sub(before);
    let per_reader = grown / 1000;
    println!(
        "resident memory: +{} KiB for 1000 readers ({per_reader} bytes each, both ends)",
        grown / 1024
    );
    assert!(
        per_reader < 64 * 1024,
        "{per_reader} bytes per reader: the buffers are not bounded"
    );
    // One more is refused, with a reason.
    let r = common::raw_get(addr, "/api/v1/events").await;
    assert_eq!(r.status, 503);
    assert!(r.json()["error"]
        .as_str()
        .unwrap()
        .starts_with("too many event-stream readers (1000 connected"));
    // Calls go on while every reader is connected and events are published to them all.
    for i in 0..100_000u32 {
        b.try_acquire().unwrap().success();
        if i % 10_000 == 0 {
            b.force_open();
            admin.sample_now();
            b.reset();
            admin.sample_now();
        }
    }
    assert_eq!(b.snapshot().totals.unwrap().admitted, 100_000);
    // Every reader got the events: read the last one from a few of them.
    for stream in readers.iter_mut().step_by(97) {
        let mut text = String::new();
        let mut buf = [0u8; 8192];
        while text.matches("event: transition\n").count() < 20 {
            let n = tokio::time::timeout(DEADLINE, stream.read(&mut buf))
                .await
                .expect("events within the deadline")
                .unwrap();
            assert!(n > 0);
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        assert!(!text.contains("event: dropped"), "20 events fit the ring");
    }
    drop(readers);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while admin.event_readers() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} readers left",
            admin.event_readers()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
