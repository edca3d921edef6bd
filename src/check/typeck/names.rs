//! Names: locals, builtins, `args`, `ustack`, results by position, and Go parameters
//! and results by their Go names.

use super::super::builtins::{self, Builtin};
use super::super::govalues::{go_ty, GoValue};
use super::super::ty::Ty;
use super::super::{ArgInfo, InstanceKind, Name};
use super::Cx;
use crate::arch::abi::Location;
use crate::diag::{closest, Diagnostic};
use crate::syntax::ast::*;

impl Cx<'_> {
    /// Records the Go type of `e` and returns its script type.
    pub(super) fn go_typed(&mut self, e: &Expr, id: crate::gotypes::TypeId) -> Ty {
        self.facts.go_types.insert(e.id, id);
        go_ty(self.types, id, self.string_limit)
    }

    pub(super) fn name(&mut self, e: &Expr, n: &str) -> Ty {
        if let Some(t) = self.facts.locals.get(n).cloned() {
            self.facts.names.insert(e.id, Name::Local(n.to_string()));
            return t;
        }
        if let Some(b) = Builtin::from_name(n) {
            return self.builtin(e, n, b);
        }
        match n {
            "nil" => return Ty::Nil,
            "args" => return self.args(e),
            "ustack" => return self.ustack(e),
            _ => {}
        }
        if self.kind == InstanceKind::Return {
            if let Some(t) = self.positional_result(e, n) {
                return t;
            }
        }
        self.go_value(e, n, e.span, false)
    }

    /// A builtin name (`elapsed`, `goid`, `func`, ...), where the probe knows it.
    fn builtin(&mut self, e: &Expr, n: &str, b: Builtin) -> Ty {
        match b {
            Builtin::Elapsed => {
                if !matches!(self.kind, InstanceKind::Return | InstanceKind::Panic) {
                    self.err(
                        Diagnostic::error(e.span, "`elapsed` is only known in `on return` and `on panic` probes")
                            .label("no matching entry here")
                            .hint("use it in `on return FUNC { ... }`"),
                    );
                    return Ty::Void;
                }
                self.uses_elapsed = true;
            }
            Builtin::Panic | Builtin::Recovered if self.kind != InstanceKind::Panic => {
                self.err(
                    Diagnostic::error(e.span, format!("`{n}` is only known in `on panic` probes"))
                        .label("no panic here")
                        .hint("`on panic FUNC { ... }` runs for each call of FUNC that a panic ended"),
                );
                return Ty::Void;
            }
            // `on begin`, `on end` and `on interval` fire in gtrace's own process.
            Builtin::Pid | Builtin::Tid | Builtin::Comm | Builtin::Goid if !self.has_function => {
                self.err(
                    Diagnostic::error(
                        e.span,
                        format!("`{n}` here would be gtrace's own, not the traced program's"),
                    )
                    .label("gtrace's, not the target's")
                    .hint("`on begin`, `on end` and `on interval` run in gtrace itself; read it in a probe of a function, which runs in the traced program"),
                );
                return Ty::Void;
            }
            Builtin::Func if !self.has_function => {
                self.err(
                    Diagnostic::error(e.span, "`func` is only known in probes of functions").label("no function here"),
                );
                return Ty::Void;
            }
            _ => {}
        }
        self.facts.names.insert(e.id, Name::Builtin(b));
        b.ty()
    }

    /// `args`: every readable parameter, for printing.
    fn args(&mut self, e: &Expr) -> Ty {
        if self.kind == InstanceKind::Line {
            self.err(
                Diagnostic::error(e.span, "`args` is only known in probes of functions' entries and returns")
                    .label("not in a line probe")
                    .hint("name the locals and parameters to print: `print(n, name)`"),
            );
            return Ty::Void;
        }
        if !self.has_function {
            self.err(
                Diagnostic::error(e.span, "`args` is only known in probes of functions").label("no function here"),
            );
            return Ty::Void;
        }
        self.facts.args = self
            .values
            .iter()
            .filter(|v| !v.is_result && !matches!(v.location, Location::Unreadable { .. }) && v.ty.is_ok())
            .filter_map(|v| match &v.ty {
                Ok(t) if !matches!(t, Ty::Go(_)) => Some(ArgInfo {
                    name: v.name.clone(),
                    location: v.location.clone(),
                    at_entry: v.at_entry,
                    type_id: v.type_id,
                    ty: t.clone(),
                }),
                _ => None,
            })
            .collect();
        Ty::Args
    }

    /// `ustack`: the Go call stack, in probes of functions.
    fn ustack(&mut self, e: &Expr) -> Ty {
        if self.kind == InstanceKind::Panic {
            self.err(
                Diagnostic::error(e.span, "`ustack` is not known in `on panic` probes")
                    .label("the call's stack is gone")
                    .hint("a panic's probe runs where the runtime recovers or dies, after the call's frames are unwound; record `ustack` in `on entry` into a self variable"),
            );
            return Ty::Void;
        }
        if !self.has_function {
            self.err(
                Diagnostic::error(e.span, "`ustack` is only known in probes of functions").label("no Go stack here"),
            );
            return Ty::Void;
        }
        Ty::Stack
    }

    /// `ret`, `ret0`, `ret1`, ...: a result by position in `on return`; None when `n` is
    /// not such a name.
    fn positional_result(&mut self, e: &Expr, n: &str) -> Option<Ty> {
        let pos = if n == "ret" { Some(0) } else { n.strip_prefix("ret").and_then(|d| d.parse::<usize>().ok()) }?;
        let results: Vec<usize> = (0..self.values.len()).filter(|i| self.values[*i].is_result).collect();
        Some(match results.get(pos) {
            Some(&i) => {
                let name = self.values[i].name.clone();
                self.go_value(e, &name, e.span, false)
            }
            None => {
                let plural = if results.len() == 1 { "" } else { "s" };
                self.err(
                    Diagnostic::error(e.span, format!("the function has {} result{plural}", results.len()))
                        .label(format!("no result {pos}")),
                );
                Ty::Void
            }
        })
    }

    /// How parameters are named without DWARF: `arg0` … in the registers of this ABI.
    fn positional_hint(&self) -> String {
        let args: Vec<&GoValue> = self.values.iter().filter(|v| !v.is_result).collect();
        let places: Vec<String> = args
            .iter()
            .map(|v| match &v.location {
                Location::Regs(pieces) => pieces.iter().map(|p| p.reg.name()).collect::<Vec<_>>().join("+"),
                Location::Stack { offset } => format!("{offset}(SP)"),
                _ => "?".into(),
            })
            .collect();
        format!(
            "this binary has no DWARF (stripped): parameters are known by position as machine words, `arg0` … `arg{}` ({}), results as `ret0` …; or give its DWARF kept aside with --debug-file",
            args.len().saturating_sub(1),
            places.join(", ")
        )
    }

    /// A parameter (or, in return probes, a result) by its Go name.
    pub(super) fn go_value(&mut self, e: &Expr, n: &str, span: Span, via_arg: bool) -> Ty {
        let found = self.values.iter().find(|v| v.name == n && (!via_arg || !v.is_result)).cloned();
        let Some(v) = found else {
            let mut candidates: Vec<&str> = self.values.iter().map(|v| v.name.as_str()).collect();
            candidates.extend(self.facts.locals.keys().map(|k| k.as_str()));
            if !via_arg {
                candidates.extend(builtins::NAMES.iter().copied());
            }
            let close = closest(n, candidates, 2);
            // A function's locals are renamed where it is inlined (`code·1`): said by
            // the name the script wrote.
            let written = n.split('·').next().unwrap_or(n);
            let mut d =
                Diagnostic::error(span, format!("unknown name `{written}`")).label("not a parameter, local or builtin");
            if !self.has_function {
                d = d.hint("begin, end and interval probes have no parameters");
            } else if self.kind == InstanceKind::Panic {
                d = d.hint("parameters are not known in `on panic` (the call's frame is gone): keep what you need in a self variable at its entry, `on entry F { self.x = x }`, and read `self.x`");
            } else if self.values.first().is_some_and(|v| v.name == "arg0") && !via_arg {
                d = d.hint(self.positional_hint());
            } else if self.values.is_empty() {
                d = d.hint("no parameters are known for this function (no DWARF, or a probe on several functions)");
            } else if self.kind == InstanceKind::Entry
                && self.values.iter().all(|v| v.name != n)
                && n.starts_with("ret")
            {
                d = d.hint("results are known in `on return` probes");
            } else if self.kind == InstanceKind::Line {
                d = d.hint(format!(
                    "the function's DWARF declares no `{n}` that holds this line: a local the compiler removed entirely is not declared at all (a build with -gcflags=all='-N -l' keeps every variable)"
                ));
            }
            if let Some(c) = close.first() {
                d = d.hint(format!("did you mean `{c}`?"));
            }
            self.err(d);
            return Ty::Void;
        };
        match v.ty {
            Ok(t) => {
                if let Location::Unreadable { reason } = &v.location {
                    self.err(
                        Diagnostic::error(span, format!("`{n}` cannot be read: {reason}"))
                            .label("unreadable at this probe"),
                    );
                    return Ty::Void;
                }
                let name = Name::GoValue {
                    name: v.name.clone(),
                    location: v.location.clone(),
                    at_entry: v.at_entry,
                    escaped: v.escaped,
                };
                self.facts.names.insert(e.id, name);
                self.facts.go_types.insert(e.id, v.type_id);
                t
            }
            Err(why) => {
                self.err(Diagnostic::error(span, why.to_string()).label("cannot be read").hint_if(why.hint()));
                Ty::Void
            }
        }
    }
}
