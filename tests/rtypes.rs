//! Go types from the runtime's own type data (what a stripped binary keeps) against
//! DWARF's (what the compiler wrote) on the same build: every field's name, offset,
//! embedding and type, for net/http's and net/url's types, on the oldest, the local and
//! the newest Go; and the same layouts found in a stripped copy, whose type base comes
//! from the moduledata instead of the symbol table. No privileges needed.

mod support;

use gtrace::gobin::Target;
use gtrace::gotypes::{TypeId, TypeKind, Types};
use support::toolchain::{self, Kind};

/// Types a script on a net/http server reads, with fields of many kinds.
const NAMES: &[&str] =
    &["net/http.Request", "net/url.URL", "net/http.Server", "net/http.response", "net/http.conn", "crypto/tls.Config"];

/// One line per field, two levels deep: what a field access depends on.
fn render(types: &Types, id: TypeId, depth: u32, out: &mut Vec<String>, indent: &str) {
    let t = types.get(id);
    // A signature's name differs (the runtime writes its packages short: `func(*http.Server)`)
    // and nothing reads through it: compared up to the signature.
    // So does an unnamed struct's in Go 1.17 (DWARF qualifies unexported fields:
    // `struct { net/http.atomic uint64 }`); its fields are compared below.
    let name = t.name.split("func(").next().unwrap_or_default();
    let name = if name.starts_with("struct {") { "struct {...}" } else { name };
    out.push(format!("{indent}{name} size={} {}", t.size, kind(&t.kind)));
    if depth == 0 {
        return;
    }
    match &t.kind {
        TypeKind::Struct { fields } => {
            for f in fields {
                out.push(format!("{indent}  .{} @{} embedded={}", f.name, f.offset, f.embedded));
                render(types, f.ty, depth - 1, out, &format!("{indent}    "));
            }
        }
        TypeKind::Pointer { elem } | TypeKind::Slice { elem } | TypeKind::Array { elem, .. } => {
            render(types, *elem, depth - 1, out, &format!("{indent}  "))
        }
        _ => {}
    }
}

fn kind(k: &TypeKind) -> String {
    match k {
        TypeKind::Int { signed } => format!("int(signed={signed})"),
        TypeKind::Array { len, .. } => format!("array({len})"),
        TypeKind::Interface { empty } => format!("interface(empty={empty})"),
        TypeKind::Map { .. } => "map".into(),
        other => format!("{other:?}").split([' ', '{']).next().unwrap_or_default().to_string(),
    }
}

fn layout(target: &Target, name: &str, from_dwarf: bool) -> Vec<String> {
    let id = if from_dwarf {
        target.type_by_name(name).unwrap_or_else(|| panic!("DWARF has no {name}"))
    } else {
        target.runtime_type_named(name).unwrap_or_else(|e| panic!("no runtime type {name}: {e:?}"))
    };
    let mut out = Vec::new();
    render(&target.types(), id, 2, &mut out, "");
    out
}

#[test]
fn runtime_type_data_gives_dwarfs_layouts_on_every_release() {
    for tc in toolchain::toolchains() {
        let Some(built) = toolchain::build_plain("httpserver", &tc) else { continue };
        let stripped = match toolchain::build("httpserver", &tc, Kind { stripped: true, ..toolchain::PLAIN }) {
            Ok(p) => p,
            Err(_) => continue,
        };
        let with_dwarf = Target::open(&built).expect("open");
        let without = Target::open(&stripped).expect("open the stripped build");
        assert!(!without.has_dwarf());
        for name in NAMES {
            let dwarf = layout(&with_dwarf, name, true);
            let runtime = layout(&with_dwarf, name, false);
            assert!(dwarf.len() > 3, "{tc} {name}: {dwarf:?}");
            assert_eq!(runtime, dwarf, "{tc} {name}: runtime type data against DWARF");
            assert_eq!(layout(&without, name, false), dwarf, "{tc} {name}: the stripped build");
        }
    }
}

#[test]
fn short_package_names_name_the_same_type_and_unknown_ones_are_refused() {
    let built = support::go_build("httpserver", &[]);
    let t = Target::open(&built).expect("open");
    let full = t.runtime_type_named("*net/http.Request").expect("full name");
    let short = t.runtime_type_named("*http.Request").expect("short name");
    assert_eq!(t.types().get(full).name, t.types().get(short).name);
    assert_eq!(t.types().get(full).name, "*net/http.Request");
    match t.runtime_type_named("*nosuchpkg.Nothing") {
        Err(gtrace::gobin::NoRuntimeType::Unknown { .. }) => {}
        other => panic!("{other:?}"),
    }
}
