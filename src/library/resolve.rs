//! Finding and parsing every file a script uses. `use "NAME"` looks for `NAME.gt` (or
//! `NAME` itself if it ends in `.gt`) in each -I folder, then in the folder of the file
//! that says `use`, then among the stdlib's libraries. Each file is read once, however
//! often it is used; a file's libraries come before the file in the result.

use super::{stdlib, Root};
use crate::diag::{closest, Diagnostic, Sources};
use crate::syntax::ast::{Item, Script, Use};
use crate::syntax::parser;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Deepest chain of `use` (a library using a library using ...).
const MAX_USE_DEPTH: usize = 32;

/// One parsed file.
pub(super) struct File {
    pub script: Script,
}

/// Where a `use` led.
enum Found {
    Path(PathBuf),
    Stdlib(&'static str, &'static str),
}

struct Loader<'a> {
    include: &'a [PathBuf],
    sources: &'a mut Sources,
    next_id: &'a mut u32,
    /// Files already read (canonical paths, `stdlib:NAME`).
    seen: HashSet<String>,
    files: Vec<File>,
    diags: Vec<Diagnostic>,
}

/// Parses `root` and, depth first, every library it uses.
pub(super) fn load_all(
    root: Root,
    include: &[PathBuf],
    sources: &mut Sources,
    next_id: &mut u32,
) -> Result<Vec<File>, Vec<Diagnostic>> {
    let mut loader = Loader { include, sources, next_id, seen: HashSet::new(), files: Vec::new(), diags: Vec::new() };
    // The root is a file (its name is its path), `-e` text, or a stdlib library.
    let identity = match root.name.strip_prefix("stdlib/").and_then(|n| n.strip_suffix(".gt")) {
        Some(lib) if root.dir.is_none() => format!("stdlib:{lib}"),
        _ => identity_of(Path::new(&root.name)),
    };
    loader.seen.insert(identity);
    loader.visit(root.name, root.text, root.dir, 0);
    if loader.diags.is_empty() {
        Ok(loader.files)
    } else {
        Err(loader.diags)
    }
}

impl Loader<'_> {
    fn visit(&mut self, name: String, text: String, dir: Option<PathBuf>, depth: usize) {
        let file = self.sources.add(name, text);
        let text = self.sources.text(file).to_string();
        let script = match parser::parse(&text, file, self.next_id) {
            Ok(s) => s,
            Err(d) => {
                self.diags.extend(d);
                return;
            }
        };
        for item in &script.items {
            let Item::Use(u) = item else { continue };
            self.use_library(u, dir.as_deref(), depth);
        }
        self.files.push(File { script });
    }

    fn use_library(&mut self, u: &Use, dir: Option<&Path>, depth: usize) {
        if depth + 1 > MAX_USE_DEPTH {
            self.diags.push(
                Diagnostic::error(u.span, "libraries nested too deeply")
                    .label(format!("more than {MAX_USE_DEPTH} levels of `use`")),
            );
            return;
        }
        let Some(found) = self.find(&u.name, dir) else {
            self.diags.push(not_found(u, self.include, dir));
            return;
        };
        match found {
            Found::Stdlib(name, text) => {
                if self.seen.insert(format!("stdlib:{name}")) {
                    self.visit(format!("stdlib/{name}.gt"), text.to_string(), None, depth + 1);
                }
            }
            Found::Path(path) => {
                if !self.seen.insert(identity_of(&path)) {
                    return;
                }
                let name = path.display().to_string();
                let text = match crate::input::read_file(&path, crate::input::MAX_TEXT) {
                    Ok(bytes) => crate::input::script_text(self.sources, &name, bytes),
                    Err(e) => {
                        Err(Diagnostic::error(u.span, format!("cannot read library {}: {}", name, error_chain(&e)))
                            .label("this library"))
                    }
                };
                match text {
                    Ok(text) => self.visit(name, text, path.parent().map(Path::to_path_buf), depth + 1),
                    Err(d) => self.diags.push(d),
                }
            }
        }
    }

    /// -I folders, then `dir`, then the stdlib.
    fn find(&self, name: &str, dir: Option<&Path>) -> Option<Found> {
        if name.is_empty() {
            return None;
        }
        let file = file_name(name);
        if file.is_absolute() {
            return file.is_file().then_some(Found::Path(file));
        }
        for d in self.include.iter().map(PathBuf::as_path).chain(dir) {
            let candidate = d.join(&file);
            if candidate.is_file() {
                return Some(Found::Path(candidate));
            }
        }
        stdlib::LIBRARIES.iter().find(|(n, _)| *n == name).map(|(n, t)| Found::Stdlib(n, t))
    }
}

/// `NAME.gt`, or `NAME` when it already ends in `.gt`.
fn file_name(name: &str) -> PathBuf {
    if name.ends_with(".gt") {
        PathBuf::from(name)
    } else {
        PathBuf::from(format!("{name}.gt"))
    }
}

fn identity_of(path: &Path) -> String {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string()
}

fn not_found(u: &Use, include: &[PathBuf], dir: Option<&Path>) -> Diagnostic {
    if u.name.is_empty() {
        return Diagnostic::error(u.span, "empty library name").label("name a library, e.g. `use \"gc\"`");
    }
    let mut places: Vec<String> = include.iter().map(|d| d.display().to_string()).collect();
    if let Some(d) = dir {
        places.push(if d.as_os_str().is_empty() { ".".to_string() } else { d.display().to_string() });
    }
    places.push("the stdlib".to_string());
    let shown = crate::diag::echoed(&u.name);
    let mut d = Diagnostic::error(u.span, format!("no library `{shown}`")).label("not found").hint(format!(
        "looked for {} in {}",
        crate::diag::echoed(&file_name(&u.name).display().to_string()),
        places.join(", ")
    ));
    let near = closest(&u.name, stdlib::names(), 2);
    if !near.is_empty() {
        d = d.hint(format!(
            "the stdlib has {}",
            near.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(" and ")
        ));
    } else {
        d = d.hint(format!("the stdlib's libraries: {}", stdlib::names().collect::<Vec<_>>().join(", ")));
    }
    d
}

/// An error and its causes, `error: cause: cause`.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}
