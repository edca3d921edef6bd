//! `--prometheus ADDR`: an HTTP/1.1 endpoint (hyper, on a small tokio runtime of its own
//! thread) that answers `GET` and `HEAD /metrics` with the maps read at that moment (as
//! text, as OpenMetrics text with exemplars or protobuf with native histograms where the
//! Accept header asks for one), 405
//! for other methods there, 404 elsewhere. It binds only the address given (`:PORT` or
//! `PORT` alone is 127.0.0.1), before anything attaches, and bounds what a client can
//! cost: headers up to 16 KiB read within 2 s, at most 32 connections at once. Idle
//! connections cannot starve a scraper: when every slot is taken, a new connection
//! closes the one that has waited longest for a request (`Pool`).

use super::source::Source;
use super::ExportError;
use super::{openmetrics, promproto, promtext};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::{oneshot, Notify};

/// The largest request head (request line and headers) read.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its request head (a scraper sends it at once).
const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections served at once.
const MAX_CONNECTIONS: usize = 32;

/// The connections being served, and those of them waiting for a request (just opened,
/// or kept alive between requests), oldest first: when every slot is taken, a new
/// connection is served and the oldest waiting one closed, so that clients that connect
/// and send nothing cannot keep a scraper out. Only when every connection is in the
/// middle of a request is a new one closed unanswered.
#[derive(Default)]
struct Pool {
    live: usize,
    /// Waiting connections by when they began to wait (a sequence number), each with
    /// what tells it to close.
    waiting: BTreeMap<u64, Arc<Notify>>,
    seq: u64,
}

impl Pool {
    /// Room for a new connection, waiting from now (its place in the order): a free slot,
    /// or the oldest waiting connection told to close (it leaves by `left`). Admitted
    /// here, not when its task first runs: a burst of connections is accepted before any
    /// of their tasks runs, and each must be one the next can close.
    fn admit(&mut self, close: &Arc<Notify>) -> Option<u64> {
        if self.live >= MAX_CONNECTIONS {
            let (_, oldest) = self.waiting.pop_first()?;
            oldest.notify_one();
        }
        self.live += 1;
        Some(self.waits(close))
    }

    /// A connection begins to wait for a request; its place in the order.
    fn waits(&mut self, close: &Arc<Notify>) -> u64 {
        self.seq += 1;
        self.waiting.insert(self.seq, close.clone());
        self.seq
    }

    /// A connection got a request (its place was `at`): it is not closed for a newer one.
    fn busy(&mut self, at: u64) {
        self.waiting.remove(&at);
    }

    fn left(&mut self, at: u64) {
        self.waiting.remove(&at);
        self.live -= 1;
    }
}

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
    let pool = Arc::new(Mutex::new(Pool::default()));
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let close = Arc::new(Notify::new());
        // Every slot busy with a request: the connection is closed unanswered.
        let Some(at) = lock(&pool).admit(&close) else { continue };
        tokio::spawn(serve(stream, source.clone(), pool.clone(), (at, close)));
    }
}

fn lock(pool: &Mutex<Pool>) -> std::sync::MutexGuard<'_, Pool> {
    pool.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One connection, until it ends, its head times out, or a newer connection needs its
/// slot while it waits for a request.
async fn serve(
    stream: tokio::net::TcpStream,
    source: Arc<Source>,
    pool: Arc<Mutex<Pool>>,
    admitted: (u64, Arc<Notify>),
) {
    let (at, close) = admitted;
    let at = Arc::new(AtomicU64::new(at));
    let service = {
        let (pool, at, close) = (pool.clone(), at.clone(), close.clone());
        hyper::service::service_fn(move |req| {
            lock(&pool).busy(at.load(Ordering::Relaxed));
            let answer = answer(&req, &source);
            // Waiting for the next request on this connection (kept alive) from now.
            at.store(lock(&pool).waits(&close), Ordering::Relaxed);
            async move { Ok::<_, std::convert::Infallible>(answer) }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let mut closed = std::pin::pin!(close.notified());
    // Whichever comes first; dropping the connection closes it.
    std::future::poll_fn(|cx| {
        if conn.as_mut().poll(cx).is_ready() || closed.as_mut().poll(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    lock(&pool).left(at.load(Ordering::Relaxed));
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
    // Protobuf (native histograms) where the scraper asks for it, else OpenMetrics
    // text (exemplars) where it asks for that, else the text format.
    let accept = req.headers().get(ACCEPT).and_then(|a| a.to_str().ok()).unwrap_or_default();
    let encoded = source.collect().map_err(|e| e.to_string()).and_then(|f| {
        if promproto::accepted(accept) {
            Ok((promproto::encode(&f), promproto::CONTENT_TYPE))
        } else if openmetrics::accepted(accept) {
            Ok((openmetrics::encode(&f), openmetrics::CONTENT_TYPE))
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
    fn a_new_connection_closes_the_oldest_waiting_one_when_full() {
        let mut pool = Pool::default();
        let closes: Vec<Arc<Notify>> = (0..=MAX_CONNECTIONS).map(|_| Arc::new(Notify::new())).collect();
        let at: Vec<u64> = closes[..MAX_CONNECTIONS].iter().map(|c| pool.admit(c).unwrap()).collect();
        // The first two are in a request: the third is the oldest waiting, and is closed.
        pool.busy(at[0]);
        pool.busy(at[1]);
        let newest = pool.admit(&closes[MAX_CONNECTIONS]).unwrap();
        assert_eq!(pool.live, MAX_CONNECTIONS + 1);
        assert!(!pool.waiting.contains_key(&at[2]));
        pool.left(at[2]);
        assert_eq!(pool.live, MAX_CONNECTIONS);
        // Every connection in a request: no room.
        for a in at[3..].iter().chain([&newest]) {
            pool.busy(*a);
        }
        assert_eq!(pool.admit(&Arc::new(Notify::new())), None);
        assert_eq!(pool.live, MAX_CONNECTIONS);
    }

    #[test]
    fn an_address_in_use_is_an_error() {
        let first = bind("127.0.0.1:0").unwrap();
        let taken = first.local_addr().unwrap().to_string();
        let e = bind(&taken).unwrap_err();
        assert!(e.to_string().contains("in use"), "{e}");
    }
}
