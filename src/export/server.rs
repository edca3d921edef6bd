//! `--prometheus ADDR`: an HTTP/1.1 endpoint (hyper, on a small tokio runtime of its own
//! thread) that answers `GET` and `HEAD /metrics` with the maps read at that moment (as
//! text, or as protobuf with native histograms where the Accept header asks for it), 405
//! for other methods there, 404 elsewhere. It binds only the address given (`:PORT` or
//! `PORT` alone is 127.0.0.1), before anything attaches, and bounds what a client can
//! cost: headers up to 16 KiB read within 10 s, at most 32 connections at once.

use super::source::Source;
use super::ExportError;
use super::{promproto, promtext};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::{oneshot, Semaphore};

/// The largest request head (request line and headers) read.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more are closed at once.
const MAX_CONNECTIONS: usize = 32;

/// `HOST:PORT`, `[V6]:PORT`, or `:PORT` and `PORT` for 127.0.0.1.
pub fn parse_addr(text: &str) -> Result<SocketAddr, ExportError> {
    let t = text.trim();
    let bad = |reason: &str| ExportError::Address { addr: text.to_string(), reason: reason.to_string() };
    let port_only = t.strip_prefix(':').unwrap_or(t);
    if !port_only.is_empty() && port_only.chars().all(|c| c.is_ascii_digit()) {
        let port: u16 = port_only.parse().map_err(|_| bad("the port is not a number from 0 to 65535"))?;
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    let mut addrs = t.to_socket_addrs().map_err(|e| bad(&e.to_string()))?;
    addrs.next().ok_or_else(|| bad("the host has no address"))
}

/// Binds `text` now, so that a taken or wrong address is an error before any probe is
/// attached.
pub fn bind(text: &str) -> Result<TcpListener, ExportError> {
    let addr = parse_addr(text)?;
    TcpListener::bind(addr).map_err(|source| ExportError::Bind { addr, source })
}

/// The running endpoint; `stop` ends it.
pub struct Server {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves `source` on `listener` from a thread of its own.
    pub fn spawn(listener: TcpListener, source: Arc<Source>) -> Result<Server, ExportError> {
        let addr =
            listener.local_addr().map_err(|source| ExportError::Bind { addr: "0.0.0.0:0".parse().unwrap(), source })?;
        listener.set_nonblocking(true).map_err(|source| ExportError::Bind { addr, source })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|source| ExportError::Bind { addr, source })?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("gtrace-prometheus".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                    let accept = tokio::spawn(accept_loop(listener, source));
                    let _ = stopped.await;
                    accept.abort();
                });
            })
            .map_err(|source| ExportError::Bind { addr, source })?;
        Ok(Server { addr, stop: Some(stop), thread: Some(thread) })
    }

    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn accept_loop(listener: tokio::net::TcpListener, source: Arc<Source>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        // Over the limit: the connection is closed unanswered.
        let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
        let source = source.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let source = source.clone();
                async move { Ok::<_, std::convert::Infallible>(answer(&req, &source)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_buf_size(MAX_HEAD)
                .serve_connection(TokioIo::new(stream), service);
            let _ = conn.await;
            drop(slot);
        });
    }
}

/// The answer to one request: the metrics for `GET`/`HEAD /metrics`, else 404 or 405.
fn answer(req: &Request<Incoming>, source: &Source) -> Response<Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        return plain(StatusCode::NOT_FOUND, "not found: gtrace serves /metrics\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    // Protobuf (native histograms) where the scraper asks for it, else text.
    let proto = req.headers().get(ACCEPT).and_then(|a| a.to_str().ok()).is_some_and(promproto::accepted);
    let encoded = source.collect().map_err(|e| e.to_string()).and_then(|f| {
        if proto {
            Ok((promproto::encode(&f), promproto::CONTENT_TYPE))
        } else {
            promtext::encode(&f).map(|b| (b, promtext::CONTENT_TYPE)).map_err(|e| e.to_string())
        }
    });
    match encoded {
        Ok((body, content_type)) => {
            let mut r = Response::new(Full::new(Bytes::from(body)));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
            r
        }
        Err(e) => plain(StatusCode::INTERNAL_SERVER_ERROR, &format!("cannot read the maps: {e}\n")),
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(text.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_alone_is_loopback() {
        assert_eq!(parse_addr(":9464").unwrap(), "127.0.0.1:9464".parse().unwrap());
        assert_eq!(parse_addr("9464").unwrap(), "127.0.0.1:9464".parse().unwrap());
        assert_eq!(parse_addr("0.0.0.0:80").unwrap(), "0.0.0.0:80".parse().unwrap());
        assert_eq!(parse_addr("[::1]:9464").unwrap(), "[::1]:9464".parse().unwrap());
    }

    #[test]
    fn bad_addresses_say_why() {
        for bad in [":99999", "nonsense", "1.2.3.4", "host:port", ""] {
            let e = parse_addr(bad).unwrap_err();
            assert!(matches!(e, ExportError::Address { .. }), "{bad}: {e}");
        }
    }

    #[test]
    fn an_address_in_use_is_an_error() {
        let first = bind("127.0.0.1:0").unwrap();
        let taken = first.local_addr().unwrap().to_string();
        let e = bind(&taken).unwrap_err();
        assert!(e.to_string().contains("in use"), "{e}");
    }
}
