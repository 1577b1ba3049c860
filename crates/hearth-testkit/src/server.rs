//! What every fake provider server shares: the request log and reply queue,
//! the listener and serve task, and the small response helpers. Each fake
//! keeps only its routes, its wire format and its request checks.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::Response;
use axum::serve::ListenerExt;
use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Largest request body accepted; long agent histories can exceed axum's 2 MB default.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// One received request, kept raw: parsing is deferred to whoever asks, so
/// the hot path only moves buffers it already owns.
struct Recorded {
    /// Path and query, for the fakes that keep them.
    path: Option<String>,
    body: Bytes,
    headers: HeaderMap,
}

struct Log<R> {
    queue: VecDeque<R>,
    requests: Vec<Recorded>,
    violations: Vec<String>,
    /// How many violations the test has read: the rest fail it on drop.
    checked: usize,
}

/// What [`Shared::record`] decided about one request.
pub(crate) enum Verdict<R> {
    /// The request keeps the platform's rules: answer it with the queued or
    /// responder's reply, or the default one when `None`.
    Accepted(Option<R>),
    /// The request breaks the platform's rules (the sentences, also in the
    /// violations): answer it with the platform's own error, as the real
    /// API would, and leave the queue alone for the next request.
    Rejected(Vec<String>),
}

/// The state the handlers of a fake share with its public handle.
pub(crate) struct Shared<R> {
    /// One lock for queue and log, so request N gets the reply queued N-th.
    log: Mutex<Log<R>>,
    count: AtomicUsize,
    arrived: Notify,
    default_delay_ns: AtomicU64,
    /// Decides the reply to a request the queue has none for (before the
    /// default one), from its JSON body.
    responder: Mutex<Option<Responder<R>>>,
}

/// A reply chosen from the request body; `None` leaves the default reply.
pub(crate) type Responder<R> = Arc<dyn Fn(&serde_json::Value) -> Option<R> + Send + Sync>;

/// The router type a fake hands to [`FakeServer::bind`].
pub(crate) type FakeRouter<R> = Router<Arc<Shared<R>>>;

impl<R> Shared<R> {
    fn lock(&self) -> MutexGuard<'_, Log<R>> {
        // A test that panicked while holding the lock leaves a usable log.
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Logs one request and, when it keeps the platform's rules, takes the
    /// reply queued for it (none when `take_reply` is false). `check` sees
    /// the request's index and headers and appends the rules it breaks,
    /// under the same lock; any makes the verdict [`Verdict::Rejected`].
    pub(crate) fn record(
        &self,
        path: Option<String>,
        headers: HeaderMap,
        body: &Bytes,
        take_reply: bool,
        check: impl FnOnce(usize, &HeaderMap, &mut Vec<String>),
    ) -> Verdict<R> {
        let (reply, broken) = {
            let mut log = self.lock();
            let index = log.requests.len();
            let mut broken = Vec::new();
            check(index, &headers, &mut broken);
            log.violations.extend(broken.iter().cloned());
            log.requests.push(Recorded {
                path,
                body: body.clone(),
                headers,
            });
            if take_reply && broken.is_empty() {
                (log.queue.pop_front(), broken)
            } else {
                (None, broken)
            }
        };
        if !broken.is_empty() {
            self.count.fetch_add(1, Ordering::AcqRel);
            self.arrived.notify_waiters();
            return Verdict::Rejected(broken);
        }
        let reply = match reply {
            Some(r) => Some(r),
            None if take_reply => {
                let responder = self
                    .responder
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                responder.and_then(|f| {
                    serde_json::from_slice::<serde_json::Value>(body)
                        .ok()
                        .and_then(|v| f(&v))
                })
            }
            None => None,
        };
        self.count.fetch_add(1, Ordering::AcqRel);
        self.arrived.notify_waiters();
        Verdict::Accepted(reply)
    }

    /// Sleeps for the default-reply delay, if one is set.
    pub(crate) async fn default_delay(&self) {
        let delay = self.default_delay_ns.load(Ordering::Relaxed);
        if delay > 0 {
            tokio::time::sleep(Duration::from_nanos(delay)).await;
        }
    }
}

/// A fake server on a local socket, generic over its reply type; stops when dropped.
pub(crate) struct FakeServer<R> {
    /// The public handle's name, for the drop check's message.
    name: &'static str,
    addr: SocketAddr,
    shared: Arc<Shared<R>>,
    task: JoinHandle<()>,
}

impl<R> Drop for FakeServer<R> {
    fn drop(&mut self) {
        self.task.abort();
        // A test that never looked at what its client broke must not pass:
        // the client got the platform's error, which hearth may have
        // retried or swallowed on the way to a green assertion.
        if std::thread::panicking() {
            return;
        }
        let unchecked = {
            let log = self.shared.lock();
            log.violations[log.checked.min(log.violations.len())..].to_vec()
        };
        assert!(
            unchecked.is_empty(),
            "{} dropped with violations the test never read (call violations() \
             and assert on them): {unchecked:#?}",
            self.name
        );
    }
}

impl<R: Send + 'static> FakeServer<R> {
    /// Binds `addr` and serves `router` (routes and fallback set) with a
    /// raised body limit and Nagle off.
    pub(crate) async fn bind(
        name: &'static str,
        addr: SocketAddr,
        router: FakeRouter<R>,
    ) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            log: Mutex::new(Log {
                queue: VecDeque::new(),
                requests: Vec::new(),
                violations: Vec::new(),
                checked: 0,
            }),
            count: AtomicUsize::new(0),
            arrived: Notify::new(),
            default_delay_ns: AtomicU64::new(0),
            responder: Mutex::new(None),
        });
        let app = router
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(Arc::clone(&shared));
        // Streams are many small writes; Nagle would add latency to each.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            name,
            addr,
            shared,
            task,
        })
    }
}

impl<R> FakeServer<R> {
    /// The socket address served.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a reply for the next request that takes one.
    pub(crate) fn push(&self, reply: R) {
        self.shared.lock().queue.push_back(reply);
    }

    /// Sets the responder asked for requests the queue has no reply for.
    pub(crate) fn set_responder(&self, responder: Responder<R>) {
        *self
            .shared
            .responder
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(responder);
    }

    /// Delays the first byte of default (unscripted) replies.
    pub(crate) fn set_default_delay(&self, delay: Duration) {
        let ns = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.shared.default_delay_ns.store(ns, Ordering::Relaxed);
    }

    /// Every request body, in order.
    ///
    /// # Panics
    /// When a body is not JSON: the client under test sent what no provider
    /// accepts, and the test must fail showing it, not compare a `null`.
    pub(crate) fn requests(&self) -> Vec<serde_json::Value> {
        self.shared
            .lock()
            .requests
            .iter()
            .enumerate()
            .map(|(i, r)| match serde_json::from_slice(&r.body) {
                Ok(v) => v,
                Err(e) => panic!(
                    "request {i} has a body that is not JSON ({e}): {}",
                    String::from_utf8_lossy(&r.body)
                ),
            })
            .collect()
    }

    /// Every request's recorded path and query, in order (empty when not kept).
    pub(crate) fn request_paths(&self) -> Vec<String> {
        self.shared
            .lock()
            .requests
            .iter()
            .map(|r| r.path.clone().unwrap_or_default())
            .collect()
    }

    /// Every request's headers, in order: lowercase names, values decoded lossily.
    pub(crate) fn request_headers(&self) -> Vec<Vec<(String, String)>> {
        self.shared
            .lock()
            .requests
            .iter()
            .map(|r| {
                r.headers
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.as_str().to_owned(),
                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                        )
                    })
                    .collect()
            })
            .collect()
    }

    /// How many requests arrived.
    pub(crate) fn request_count(&self) -> usize {
        self.shared.count.load(Ordering::Acquire)
    }

    /// Broken rules seen so far, one sentence each; reading them marks them
    /// checked, so dropping the fake no longer fails the test for them.
    pub(crate) fn violations(&self) -> Vec<String> {
        let mut log = self.shared.lock();
        log.checked = log.violations.len();
        log.violations.clone()
    }

    /// Returns once at least `n` requests have arrived.
    pub(crate) async fn wait_for_requests(&self, n: usize) {
        loop {
            let notified = self.shared.arrived.notified();
            let mut notified = std::pin::pin!(notified);
            // Registering before the check means no arrival can slip between.
            notified.as_mut().enable();
            if self.request_count() >= n {
                return;
            }
            notified.await;
        }
    }

    /// Writes the `Debug` form of the public handle called `name`.
    pub(crate) fn debug(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(name)
            .field("addr", &self.addr)
            .field("requests", &self.request_count())
            .finish()
    }
}

/// Whether the request declares a JSON body (`Content-Type:
/// application/json`, parameters allowed), as every provider API requires.
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// Sends the frames one by one, `gap` apart.
pub(crate) fn paced(frames: Vec<Vec<u8>>, gap: Duration) -> Body {
    let stream = futures_util::stream::unfold(
        (frames.into_iter(), true),
        move |(mut it, first)| async move {
            let frame = it.next()?;
            if !first && !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            Some((Ok::<_, Infallible>(Bytes::from(frame)), (it, false)))
        },
    );
    Body::from_stream(stream)
}

/// The frames in one buffer, or paced `gap` apart when `gap` is not zero.
pub(crate) fn frames_body(frames: Option<Vec<Vec<u8>>>, gap: Duration) -> Body {
    let frames = frames.unwrap_or_default();
    if gap.is_zero() {
        Body::from(frames.concat())
    } else {
        paced(frames, gap)
    }
}

/// The first `n` frames at once, then nothing more and no end: a stream the
/// client has to cut off (a run cancelled mid-answer).
pub(crate) fn stalled_body(frames: Option<Vec<Vec<u8>>>, n: usize) -> Body {
    let head: Vec<u8> = frames
        .unwrap_or_default()
        .into_iter()
        .take(n)
        .flatten()
        .collect();
    let stream = futures_util::StreamExt::chain(
        futures_util::stream::iter([Ok::<_, Infallible>(Bytes::from(head))]),
        futures_util::stream::pending(),
    );
    Body::from_stream(stream)
}

/// The first `n` frames at once, then the rest once `gate` opens.
pub(crate) fn gated_body(frames: Option<Vec<Vec<u8>>>, n: usize, gate: crate::reply::Gate) -> Body {
    let frames = frames.unwrap_or_default();
    let split = n.min(frames.len());
    let head: Vec<u8> = frames[..split].concat();
    let tail: Vec<u8> = frames[split..].concat();
    let rest = futures_util::stream::once(async move {
        gate.wait().await;
        Ok::<_, Infallible>(Bytes::from(tail))
    });
    let stream = futures_util::StreamExt::chain(
        futures_util::stream::iter([Ok::<_, Infallible>(Bytes::from(head))]),
        rest,
    );
    Body::from_stream(stream)
}

/// A body that never sends a byte nor ends.
pub(crate) fn hang_body() -> Body {
    Body::from_stream(futures_util::stream::pending::<Result<Bytes, Infallible>>())
}

/// Appends a scripted reply's extra headers, skipping invalid ones.
pub(crate) fn append_headers(resp: &mut Response, headers: &[(String, String)]) {
    for (k, v) in headers {
        if let (Ok(k), Ok(v)) = (
            HeaderName::try_from(k.as_str()),
            HeaderValue::try_from(v.as_str()),
        ) {
            resp.headers_mut().append(k, v);
        }
    }
}

/// Generates the public methods every fake shares and that delegate to its
/// `inner: FakeServer<_>` unchanged: `Debug`, `start`, `addr`,
/// `request_headers`, `request_count`, `wait_for_requests`. The fake must
/// define `bind(addr) -> io::Result<Self>`.
macro_rules! fake_server_common {
    ($ty:ident, $what:literal) => {
        impl ::std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                self.inner.debug(stringify!($ty), f)
            }
        }

        impl $ty {
            /// Starts on 127.0.0.1 with an OS-chosen port.
            ///
            /// # Panics
            /// When no local port can be bound: the test environment is broken and
            /// no test using the fake can run.
            // No lint attribute: clippy does not look inside this macro's expansion.
            pub async fn start() -> Self {
                Self::bind(::std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
                    .await
                    .expect(concat!("bind the fake ", $what, " server on 127.0.0.1:0"))
            }

            /// The socket address served.
            pub fn addr(&self) -> ::std::net::SocketAddr {
                self.inner.addr()
            }

            /// Every request's headers, in order: lowercase names, values decoded lossily.
            pub fn request_headers(&self) -> Vec<Vec<(String, String)>> {
                self.inner.request_headers()
            }

            /// How many requests arrived.
            pub fn request_count(&self) -> usize {
                self.inner.request_count()
            }

            /// Returns once at least `n` requests have arrived.
            pub async fn wait_for_requests(&self, n: usize) {
                self.inner.wait_for_requests(n).await;
            }
        }
    };
}
pub(crate) use fake_server_common;
