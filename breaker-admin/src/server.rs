//! The ready-made listener, for a service without an HTTP server of its own: hyper over
//! HTTP/1.1, on loopback unless told otherwise.

use crate::service::PeerAddr;
use crate::Admin;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tower::ServiceExt;

/// Where [`Admin::listen`] binds: `127.0.0.1`, a port the operating system chooses.
pub const LOOPBACK: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

/// How long a client may take to send a request's headers before its connection is closed
/// (a slow client must not hold a connection open forever).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A running listener; from [`Admin::listen`] or [`Admin::listen_on`]. Dropping it (or
/// [`shutdown`](Self::shutdown)) stops accepting and closes every connection, event streams
/// included.
#[derive(Debug)]
pub struct Listening {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Listening {
    /// The address it is bound to (with the port the operating system chose).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The dashboard's URL: `http://{local_addr}/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Stops accepting and closes every connection.
    pub fn shutdown(self) {}
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Admin {
    /// Serves the [`service`](Admin::service) on `127.0.0.1` at a port the operating system
    /// chooses ([`LOOPBACK`]): reachable from this machine only.
    ///
    /// # Errors
    /// If the address cannot be bound.
    pub async fn listen(&self) -> io::Result<Listening> {
        self.listen_on(LOOPBACK).await
    }

    /// Serves the [`service`](Admin::service) on `addr`. Any address other than loopback
    /// exposes the breakers' state (and, with admin actions on, their controls behind the
    /// token) to the network: bind one only behind TLS or in a trusted network.
    ///
    /// # Errors
    /// If the address cannot be bound.
    pub async fn listen_on(&self, addr: SocketAddr) -> io::Result<Listening> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        if !addr.ip().is_loopback() {
            tracing::warn!(
                target: "breaker_admin",
                %addr,
                "the breaker admin listens beyond loopback: anyone who can reach it sees every \
                 breaker"
            );
        }
        let service = self.service();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                while connections.try_join_next().is_some() {}
                let (stream, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: wait a little, keep serving.
                        tracing::warn!(target: "breaker_admin", error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let service = service.clone();
                connections.spawn(async move {
                    let hyper_service = hyper::service::service_fn(
                        move |mut req: http::Request<hyper::body::Incoming>| {
                            req.extensions_mut().insert(PeerAddr(peer));
                            service.clone().oneshot(req)
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_READ_TIMEOUT)
                        .serve_connection(TokioIo::new(stream), hyper_service)
                        .await;
                });
            }
        });
        Ok(Listening { addr, task })
    }
}
