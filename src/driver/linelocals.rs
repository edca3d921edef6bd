//! `-l FILE.go:LINE`: where a line probe would go, and at each place the locals and
//! parameters in scope there, with their Go types and where each is (or why it cannot be
//! read there): what `on line "FILE.go:LINE"` can name, before writing the script.

use crate::gobin::{LineError, LineSite, Local, LocalState, Target, ValueLocation};

/// `main.go:54` as a file and a line.
pub fn parse(pattern: &str) -> Option<(&str, u32)> {
    let (file, line) = pattern.rsplit_once(':')?;
    let line = line.parse::<u32>().ok()?;
    (file.ends_with(".go") && line > 0).then_some((file, line))
}

/// The listing, or why there is none.
pub fn listing(target: &Target, file: &str, line: u32) -> Result<String, String> {
    let sites = target.line_sites(file, line).map_err(|e| why_not(&e, file, line))?;
    let mut out = String::new();
    for site in &sites {
        out.push_str(&heading(site));
        let locals = target.locals_at(site).map_err(|e| e.to_string())?;
        if locals.is_empty() {
            out.push_str("    (no locals or parameters in DWARF here)\n");
        }
        for l in &locals {
            out.push_str(&format!("    {}\n", describe(target, l, site)));
        }
    }
    Ok(out)
}

/// `main.go:156 at 0x4a09c5 in main.escapes:` (and the function it is inlined into).
fn heading(site: &LineSite) -> String {
    let file = site.file.rsplit('/').next().unwrap_or(&site.file);
    let within =
        if site.inlined { format!("{} (inlined into {})", site.frame, site.function) } else { site.frame.clone() };
    let exact = if site.exact { "" } else { "; one run of the line can pass two places: may count twice" };
    format!("{file}:{} at {:#x} in {within}{exact}:\n", site.line, site.addr)
}

/// `total int [8(SP)] (moved to the heap: read through &total)`.
fn describe(target: &Target, l: &Local, site: &LineSite) -> String {
    let file = site.file.rsplit('/').next().unwrap_or(&site.file);
    let types = target.types();
    let ty = l.ty.map(|t| types.get(t).name.clone()).unwrap_or_else(|| "(no type)".into());
    let (name, note) = match l.name.strip_prefix('&') {
        Some(bare) => {
            let pointee = ty.strip_prefix('*').unwrap_or(&ty).to_string();
            let note = format!(" (moved to the heap: {} holds its address)", l.name);
            return format!("{bare} {pointee} {}{note}", place(l, site, file));
        }
        None if l.param => (l.name.clone(), " (parameter)".to_string()),
        None => (l.name.clone(), String::new()),
    };
    format!("{name} {ty} {}{note}", place(l, site, file))
}

/// Where `l` is at the site, or why it cannot be read there.
fn place(l: &Local, site: &LineSite, file: &str) -> String {
    let declared = l.decl_line.map(|d| format!("{file}:{d}")).unwrap_or_else(|| "another line".into());
    match &l.state {
        LocalState::InScope(ValueLocation::At(loc)) => super::listing::location(loc),
        LocalState::InScope(ValueLocation::Nowhere) if l.decl_line == Some(site.line) && !l.param => {
            "holds nothing yet where the line starts (declared on it)".into()
        }
        LocalState::InScope(ValueLocation::Nowhere) => "optimized away here".into(),
        LocalState::InScope(ValueLocation::Unsupported(why)) => format!("cannot be read here: {why}"),
        LocalState::NotYet => format!("not declared yet (at {declared})"),
        LocalState::OutOfScope => {
            format!("not in scope (declared at {declared}, in a block that does not hold the line)")
        }
    }
}

/// Why `file:line` has no place to probe.
fn why_not(e: &LineError, file: &str, line: u32) -> String {
    match e {
        LineError::NoDwarf => "the binary has no DWARF line table (stripped? --debug-file gives one kept aside)".into(),
        LineError::NoFile { close } if close.is_empty() => format!("no file of the binary is named {file}"),
        LineError::NoFile { close } => format!("no file of the binary is named {file}; close: {}", close.join(", ")),
        LineError::Ambiguous { candidates } => {
            format!("{file} names several files: {} (give more of the path)", candidates.join(", "))
        }
        LineError::NoCode { path, before, after } => {
            let near: Vec<String> = [before, after].iter().filter_map(|l| l.map(|l| l.to_string())).collect();
            format!("{path}:{line} has no code; lines near it that have some: {}", near.join(", "))
        }
        LineError::Target(e) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn a_file_and_line_is_told_from_a_function_pattern() {
        assert_eq!(parse("main.go:54"), Some(("main.go", 54)));
        assert_eq!(parse("server/handler.go:7"), Some(("server/handler.go", 7)));
        assert_eq!(parse("main.*"), None);
        assert_eq!(parse("main.go:0"), None);
        assert_eq!(parse("net/http.(*conn).serve"), None);
    }
}
