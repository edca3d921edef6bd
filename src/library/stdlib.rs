//! The standard library: the `.gt` files of stdlib/, embedded in the binary so that an
//! installed gtrace finds them anywhere. Each file starts with `#` comment lines that
//! document it; the first is its one-line summary.

/// Every stdlib library: its name (what `use "NAME"` and `gtrace NAME` take) and text.
pub const LIBRARIES: &[(&str, &str)] = &[
    ("gc", include_str!("../../stdlib/gc.gt")),
    ("grpc", include_str!("../../stdlib/grpc.gt")),
    ("http", include_str!("../../stdlib/http.gt")),
    ("httpclient", include_str!("../../stdlib/httpclient.gt")),
    ("kafka", include_str!("../../stdlib/kafka.gt")),
    ("lock", include_str!("../../stdlib/lock.gt")),
    ("offcpu", include_str!("../../stdlib/offcpu.gt")),
    ("pgx", include_str!("../../stdlib/pgx.gt")),
    ("redis", include_str!("../../stdlib/redis.gt")),
    ("sched", include_str!("../../stdlib/sched.gt")),
    ("sql", include_str!("../../stdlib/sql.gt")),
];

/// What a program must have for each stdlib library that probes a package, said when
/// the library is run on a program without it (`applies`). The others (gc, lock,
/// sched) need only the Go runtime.
const NEEDS: &[(&str, &str)] = &[
    ("grpc", "gRPC server or client (google.golang.org/grpc)"),
    ("http", "net/http server (net/http, or golang.org/x/net/http2)"),
    ("httpclient", "net/http client (net/http.Client)"),
    ("kafka", "Kafka Writer or Reader (github.com/segmentio/kafka-go)"),
    ("pgx", "PostgreSQL client (github.com/jackc/pgx/v5)"),
    ("redis", "redis client (github.com/redis/go-redis/v9)"),
    ("sql", "database/sql"),
];

/// What a program must have for the stdlib library `name` ("net/http server ..."), or
/// None when the Go runtime is enough.
pub fn needs(name: &str) -> Option<&'static str> {
    NEEDS.iter().find(|(n, _)| *n == name).map(|(_, needs)| *needs)
}

/// The text of the stdlib library `name`.
pub fn get(name: &str) -> Option<&'static str> {
    LIBRARIES.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

/// The names of every stdlib library, for "did you mean" hints.
pub fn names() -> impl Iterator<Item = &'static str> {
    LIBRARIES.iter().map(|(n, _)| *n)
}

/// A library's first comment line, without the `#`: what it is for.
pub fn summary(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix('#').or_else(|| l.strip_prefix("//")))
        .map(str::trim)
        .unwrap_or("")
}

/// `--list-libraries`: a line per stdlib library, with its summary.
pub fn listing() -> String {
    let width = names().map(str::len).max().unwrap_or(0);
    LIBRARIES.iter().map(|(name, text)| format!("{name:width$}  {}\n", summary(text))).collect()
}
