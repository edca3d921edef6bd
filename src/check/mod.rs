//! Semantic checks: resolve probes to functions, names to parameters and builtins, and
//! type every expression. The tree is not changed: facts go into side tables
//! (`Facts`, keyed by `ExprId`), errors into `Diagnostics`.
//!
//! Passes, in order: `probes` (symbols → functions and probe sites), then per probe
//! instance (`instances`) `typeck` (names and types, map shapes into `maps::MapTable`),
//! and last what lowering needs of the binary (`binary`). The binary is asked through
//! `gobin::GoBinary`, a real one or a fake in tests.

pub mod asserted;
pub mod binary;
pub mod builtins;
pub mod generics;
pub mod globals;
pub mod govalues;
mod idle;
pub mod instances;
pub mod keynames;
pub mod lineprobe;
pub mod locals;
pub mod maps;
pub mod probes;
pub mod skips;
pub mod ty;
pub mod typeck;
pub mod unreadable;

use crate::arch::abi::Location;
use crate::diag::{Diagnostic, Diagnostics};
use crate::gobin::GoBinary;
use crate::syntax::ast::{ExprId, Script, Span};
use std::collections::HashMap;
use ty::Ty;

pub use builtins::Builtin;
pub use maps::{MapInfo, MapTable};

/// A script that passed every check, with what lowering needs to know about it.
#[derive(Debug, Default)]
pub struct Checked {
    pub instances: Vec<Instance>,
    pub maps: MapTable,
    /// `self.NAME` variables: their index (part of the map key) and type.
    pub self_vars: std::collections::BTreeMap<String, SelfVar>,
    /// The Go types the facts name (`TypeId`s index this arena): a copy of what the
    /// target had parsed when checking ended, so later passes need no target state.
    pub types: crate::gotypes::Types,
    /// The functions and sites probes passed over, with why.
    pub skipped: Vec<skips::Skipped>,
    /// What lowering needs of the binary, so that it reads none.
    pub binary: binary::BinaryFacts,
}

#[derive(Clone, Debug)]
pub struct SelfVar {
    pub index: u32,
    pub ty: Ty,
    /// Where it was first assigned.
    pub span: Span,
}

/// One probe of the script, specialised to a group of probed functions that share one
/// compiled program: all of them when the body reads no Go values, else one function.
#[derive(Debug)]
pub struct Instance {
    /// Index of the probe in `Script::items`.
    pub item: usize,
    pub kind: InstanceKind,
    pub functions: Vec<FuncSite>,
    pub facts: Facts,
    /// The probe reads `elapsed`, so the functions' entries must be timed.
    pub uses_elapsed: bool,
    /// The parameters a return probe reads: read at the entry of the same call and
    /// carried to the return (its functions' entries must be probed for them too).
    pub carried: Vec<Carried>,
    /// Where the dictionary of the probed shape function is at its entry, when `func`
    /// names the instantiation it was called with (see `generics`); a return probe
    /// carries it (`generics::CARRIED_DICTIONARY` in `carried`).
    pub dictionary: Option<crate::arch::abi::Location>,
    /// Text for messages and listings: `on return main.F`.
    pub describe: String,
    /// The probe's header in the script.
    pub span: Span,
}

impl Instance {
    /// Whether a return probe needs what the entry of the same call recorded: its time
    /// (`elapsed`) or its parameters.
    pub fn needs_entry(&self) -> bool {
        self.kind == InstanceKind::Return && (self.uses_elapsed || !self.carried.is_empty())
    }

    /// An `on entry` probe that reads the program's trace context (`trace_context`):
    /// compiled into its functions' entry programs, whose calls are kept as frames.
    pub fn reads_context(&self) -> bool {
        self.kind == InstanceKind::Entry && self.facts.context
    }
}

/// A parameter a return probe reads, carried from the entry of the same call.
#[derive(Clone, Debug, PartialEq)]
pub struct Carried {
    pub name: String,
    /// Where it is at the function's entry.
    pub location: Location,
    /// Its size in bytes.
    pub size: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceKind {
    Entry,
    Return,
    /// Where a source line starts.
    Line,
    /// `on panic F`: runs at runtime.recovery or runtime.fatalpanic for each call of F
    /// the panic ended.
    Panic,
    Begin,
    End,
    Interval {
        nanos: u64,
    },
}

/// A probed function and the addresses its probes attach to.
#[derive(Clone, Debug)]
pub struct FuncSite {
    pub name: String,
    pub entry: u64,
    pub returns: Vec<u64>,
    /// Set when this is a place where the function was inlined (its entry is the
    /// inlined call's probe address; parameters are where DWARF says, not in ABI registers).
    pub inlined: Option<crate::gobin::InlinedSite>,
    /// Set when this is a place where a source line starts (its entry is the site's
    /// address; the names are the locals in scope there). `name` is the function the
    /// line is in (the inlined function, in an inlined copy).
    pub line: Option<crate::gobin::LineSite>,
    /// Set when the probe named an instantiation of generic code (`"main.Sum[int]"`):
    /// the link-time address of its dictionary, the only one whose calls of this shape
    /// function fire the probe (check/generics.rs).
    pub dictionary: Option<u64>,
}

impl FuncSite {
    /// The site of a function's own calls: its entry and returns.
    pub fn called(name: &str, entry: u64, returns: Vec<u64>) -> FuncSite {
        FuncSite { name: name.to_string(), entry, returns, inlined: None, line: None, dictionary: None }
    }
}

/// What a name in an expression refers to.
#[derive(Clone, Debug, PartialEq)]
pub enum Name {
    /// A parameter or result of the probed function, where the ABI put it; with
    /// `at_entry`, a parameter in a return probe, read where `location` is at the entry
    /// of the same call and carried to the return.
    GoValue {
        name: String,
        location: Location,
        at_entry: bool,
        /// `location` holds a pointer to the value (a local moved to the heap).
        escaped: bool,
    },
    /// A package-level variable at its link-time address (a PIE adds its load bias).
    Global {
        name: String,
        addr: u64,
    },
    /// A probe-local variable (`x := ...`).
    Local(String),
    Builtin(Builtin),
}

/// Side tables for one instance.
#[derive(Debug, Default)]
pub struct Facts {
    pub types: HashMap<ExprId, Ty>,
    /// The untyped constant expressions (literals and what is folded from them) and
    /// their values; `types` holds the type each took (from the other operand).
    pub consts: HashMap<ExprId, i128>,
    /// The untyped float constants (`1.5`, `-2e-3`) as written, without `_`: rounded to
    /// the type they took (`types`) once, when lowered.
    pub floats: HashMap<ExprId, String>,
    pub names: HashMap<ExprId, Name>,
    /// Types of the locals, by name.
    pub locals: HashMap<String, Ty>,
    /// The Go (DWARF) type of every expression that denotes a Go value: parameters,
    /// fields, elements, dereferences.
    pub go_types: HashMap<ExprId, crate::gotypes::TypeId>,
    /// What `args` prints: every readable parameter with its place and type.
    pub args: Vec<ArgInfo>,
    /// The probe reads or writes `self` variables (so it needs the goroutine id).
    pub uses_self: bool,
    /// Conditions known when the script is checked (`defined(x)`, `!defined(x)`): only
    /// the branch they take is checked and compiled.
    pub static_conds: HashMap<ExprId, bool>,
    /// Promoted fields (`c.pa` of a field of an embedded struct): the embedded fields
    /// passed through, in order.
    pub promoted: HashMap<ExprId, Vec<String>>,
    /// The body calls `trace_context(...)`.
    pub context: bool,
    /// `span(...)` calls, by the call's id.
    pub spans: HashMap<ExprId, SpanArgs>,
    /// With `span()`: where the function's first `context.Context` parameter is at its
    /// entry (the program's span is looked for in it).
    pub span_ctx: Option<Location>,
    /// In a return probe with `span()`: the function's `error` result (a non-nil one
    /// makes the span's status an error).
    pub span_error: Option<ArgInfo>,
    /// The body reads `m[k]` of a Go map (which hashes with the process's keys: a PIE
    /// needs its load bias).
    pub map_index: bool,
    /// `v.(*T)` of an interface value: the link-time address of `*T`'s runtime type
    /// descriptor, which the value's dynamic type must be (else the pointer is nil).
    pub dynamic_asserts: HashMap<ExprId, u64>,
    /// The values printed (`print`, `printf`, `span()` attributes): the only ones a
    /// probe may copy whole, so the only ones whose interfaces need dynamic types.
    pub printed: Vec<ExprId>,
}

impl Facts {
    /// Whether the body compares or reads link-time addresses (package variables, the
    /// runtime type descriptors of `v.(*T)`), which a PIE moves by its load bias.
    pub fn uses_link_addresses(&self) -> bool {
        !self.dynamic_asserts.is_empty() || self.names.values().any(|n| matches!(n, Name::Global { .. }))
    }
}

/// The arguments of one `span(...)`: each one's attribute key, `None` for `name:`.
#[derive(Clone, Debug, Default)]
pub struct SpanArgs {
    /// One for each argument in `fields`, in order.
    pub keys: Vec<Option<String>>,
    /// The arguments sent as the record's fields (the name and the attributes), by index.
    pub fields: Vec<usize>,
    /// `start:` (an ended span: from that kernel time to now, made by this probe alone,
    /// not by the call's entry and return), by index.
    pub start: Option<usize>,
    /// `error:` of an ended span (a bool, or a string: non-empty is an error), by index.
    pub error: Option<usize>,
    /// `parent:` of an ended span: a W3C traceparent (the program's trace), or a
    /// `context.Context` (the OpenTelemetry SDK's span in it, sdkcontext.rs), by index.
    pub parent: Option<usize>,
    /// `parent:` is a `context.Context`, not a traceparent.
    pub parent_ctx: bool,
    /// Where that `context.Context` parent is written (said when no SDK can be read).
    pub parent_ctx_at: Option<Span>,
    /// `kind:` (OTLP's span kind), INTERNAL when not given.
    pub kind: crate::plan::SpanKind,
}

impl SpanArgs {
    /// A span of the call, from its entry to its return (not `start:`).
    pub fn of_call(&self) -> bool {
        self.start.is_none()
    }
}

/// The names of a `span(...)` call's arguments give it a `start:`: an ended span.
pub fn spans_from_start(names: &[Option<crate::syntax::ast::Ident>]) -> bool {
    names.iter().flatten().any(|n| n.name == "start")
}

impl Facts {
    /// The body makes spans of its call (`span()` without `start:`).
    pub fn spans_calls(&self) -> bool {
        self.spans.values().any(SpanArgs::of_call)
    }
}

#[derive(Clone, Debug)]
pub struct ArgInfo {
    pub name: String,
    pub location: Location,
    /// Carried from the entry (a return probe's `args`).
    pub at_entry: bool,
    pub type_id: crate::gotypes::TypeId,
    pub ty: Ty,
}

impl Facts {
    pub fn ty(&self, id: ExprId) -> &Ty {
        self.types.get(&id).unwrap_or(&Ty::Void)
    }
}

/// Runs every check in order. Returns `None` when an error was reported.
/// `string_limit`: how many bytes of a Go string to read (`--string-limit`).
pub fn check(script: &Script, target: &dyn GoBinary, diags: &mut Diagnostics, string_limit: u32) -> Option<Checked> {
    let mut checked = Checked::default();
    let resolved = probes::resolve(script, target, diags, &mut checked.skipped);
    if diags.has_errors() {
        return None;
    }
    for probe in resolved {
        instances::check_probe(script, probe, target, &mut checked, diags, string_limit);
    }
    idle::drop_idle(script, &mut checked);
    untimeable_entries(script, target, &mut checked, diags);
    checked.maps.check_references(diags);
    checked.binary = binary::facts(target, &checked);
    if checked.binary.otel.is_none() {
        unread_sdk_parents(&checked, diags);
    }
    checked.types = target.types().clone();
    if diags.has_errors() {
        None
    } else {
        Some(checked)
    }
}

/// A return probe that uses `elapsed` or parameters also needs a uprobe at each
/// function's entry: the
/// functions whose entry the kernel would refuse are passed over (an error when that
/// leaves the probe nothing).
fn untimeable_entries(script: &Script, target: &dyn GoBinary, checked: &mut Checked, diags: &mut Diagnostics) {
    for inst in checked.instances.iter_mut().filter(|i| i.needs_entry()) {
        let before = inst.functions.len();
        let mut last = None;
        inst.functions.retain(|f| match target.uprobe_refusal(f.entry) {
            Some(r) => {
                let reason = skips::SkipReason::EntryRefused(r);
                checked.skipped.push(skips::Skipped {
                    probe: inst.describe.clone(),
                    function: f.name.clone(),
                    addr: Some(f.entry),
                    reason: reason.clone(),
                });
                last = Some((f.name.clone(), reason));
                false
            }
            None => true,
        });
        if let (true, Some((name, reason)), crate::syntax::ast::Item::Probe(p)) =
            (inst.functions.is_empty() && before > 0, last, &script.items[inst.item])
        {
            diags.push(
                crate::diag::Diagnostic::error(p.span, format!("`{name}` cannot be probed: {}", reason.describe()))
                    .label("cannot time its calls"),
            );
        }
    }
}

/// Without the OpenTelemetry SDK's layout (no SDK in the binary, or no DWARF for it),
/// `span(start:, parent: ctx)` finds no parent in `ctx`: its spans start traces of their
/// own, said once for each place.
fn unread_sdk_parents(checked: &Checked, diags: &mut Diagnostics) {
    let mut said = std::collections::BTreeSet::new();
    let places = checked.instances.iter().flat_map(|i| i.facts.spans.values().filter_map(|s| s.parent_ctx_at));
    for at in places {
        if said.insert((at.file, at.start)) {
            diags.push(
                Diagnostic::warning(at, "no OpenTelemetry SDK span can be read from a context.Context in this binary (no SDK, or no DWARF for it)")
                    .label("no parent found here: these spans start traces of their own")
                    .hint("docs/language.md, \"Spans\": build the program with the SDK and without -ldflags=-w, or pass a traceparent as parent:"),
            );
        }
    }
}
