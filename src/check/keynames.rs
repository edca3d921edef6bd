//! The names of map keys: written (`@m[method: x]`) or derived from the key's expression
//! (`req.URL.Path` gives `path`), and the rules a name must follow to be a Prometheus label
//! and an OpenTelemetry attribute (docs/language.md, "Named keys").

use crate::syntax::ast::{Expr, ExprKind, MapRef, Span, UnOp};

/// The name of one key of one use of a map.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyName {
    pub name: String,
    /// Written by the user (`method: x`), not derived.
    pub explicit: bool,
    /// The written name, or the key expression a derived name comes from.
    pub span: Span,
}

/// The names of `map`'s keys as this use gives them.
pub fn key_names(map: &MapRef) -> Vec<KeyName> {
    map.keys
        .iter()
        .enumerate()
        .map(|(i, k)| match map.key_name(i) {
            Some(n) => KeyName { name: n.name.clone(), explicit: true, span: n.span },
            None => KeyName { name: derived(k, i), explicit: false, span: k.span },
        })
        .collect()
}

/// The name of an unnamed key: its expression's last name in snake case (`req.URL.Path`
/// gives `path`, `self.http_method` gives `http_method`, `r.StatusCode` gives
/// `status_code`), or `key<i>` for an expression without one (a literal, arithmetic, a
/// call).
pub fn derived(e: &Expr, index: usize) -> String {
    match last_name(e) {
        Some(n) => snake_case(n),
        None => format!("key{index}"),
    }
}

fn last_name(e: &Expr) -> Option<&str> {
    match &e.kind {
        ExprKind::Name(n) | ExprKind::SelfVar(n) => Some(n),
        ExprKind::Field { field, .. } => Some(&field.name),
        ExprKind::Map(m) if !m.name.name.is_empty() => Some(&m.name.name),
        ExprKind::Index { base, .. } | ExprKind::Assert { base, .. } => last_name(base),
        ExprKind::Unary { op: UnOp::Deref, operand } => last_name(operand),
        _ => None,
    }
}

/// `StatusCode` → `status_code`, `URL` → `url`, `HTTPMethod` → `http_method`, `userID` →
/// `user_id`; names already in snake case are unchanged.
pub fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                out.push('_');
            }
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Names a key cannot take: `le` is a Prometheus histogram's bucket bound; names starting
/// with `__` are reserved by Prometheus.
pub const RESERVED: &[&str] = &["le"];

/// Why `name` cannot be a label name, or `None` if it can: ASCII letters, digits and `_`,
/// not starting with a digit (Prometheus's rule, which OpenTelemetry accepts).
pub fn invalid(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some("a key's name is made of ASCII letters, digits and `_`, and does not start with a digit".into());
    }
    if name.starts_with("__") {
        return Some("names starting with `__` are reserved by Prometheus".into());
    }
    if RESERVED.contains(&name) {
        return Some(format!("`{name}` is the bucket bound of a Prometheus histogram"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_of_go_names() {
        for (go, snake) in [
            ("Path", "path"),
            ("URL", "url"),
            ("StatusCode", "status_code"),
            ("HTTPMethod", "http_method"),
            ("userID", "user_id"),
            ("http_method", "http_method"),
            ("ret0", "ret0"),
            ("a1B", "a1_b"),
            ("x", "x"),
        ] {
            assert_eq!(snake_case(go), snake, "{go}");
        }
    }

    #[test]
    fn label_names() {
        assert_eq!(invalid("method"), None);
        assert_eq!(invalid("_x1"), None);
        assert!(invalid("1x").is_some());
        assert!(invalid("größe").is_some());
        assert!(invalid("a-b").is_some());
        assert!(invalid("").is_some());
        assert!(invalid("__name__").unwrap().contains("reserved"));
        assert!(invalid("le").unwrap().contains("histogram"));
    }
}
