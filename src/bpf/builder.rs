//! What the lowering emits into: a growing instruction list with forward and backward
//! labels, map references and kfunc calls recorded as relocations, and source comments. `finish`
//! resolves the labels into jump offsets and checks what the verifier would reject
//! outright (length, last instruction).

use super::insn::{self, Insn, Reg, BPF_JA, BPF_JMP};
use super::kfuncs::{kfunc_call, Kfunc, KfuncCall};
use thiserror::Error;

/// The kernel's limit on instructions of a privileged program (`BPF_COMPLEXITY_LIMIT_INSNS`).
pub const MAX_INSNS: usize = 1_000_000;

/// A jump target inside one `Builder`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Label(usize);

impl Label {
    /// The `index`th label a builder hands out (`new_label` counts from 0): for IRs
    /// that number their labels before writing into a builder.
    pub const fn from_index(index: usize) -> Label {
        Label(index)
    }
}

/// An instruction loading a map's fd, which the loader must patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relocation {
    /// Index of the first half of the `ld_map_fd` instruction.
    pub insn_index: usize,
    /// The map's symbol in the object.
    pub map: String,
}

/// A finished program: plain instructions, ready to encode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Program {
    pub insns: Vec<Insn>,
    pub relocations: Vec<Relocation>,
    /// The kfunc calls, which the loader completes with the kernel's BTF ids.
    pub kfunc_calls: Vec<KfuncCall>,
    /// Texts shown before instruction `index` in the disassembly (in order).
    pub comments: Vec<(usize, String)>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum BuildError {
    #[error("label {label} is jumped to but never bound")]
    UnboundLabel { label: usize },
    #[error("label {label} is bound twice (at {first} and {second})")]
    LabelBoundTwice { label: usize, first: usize, second: usize },
    #[error("label {label} is bound after the last instruction")]
    LabelPastEnd { label: usize },
    #[error("the jump at instruction {insn_index} needs offset {offset}, outside i16")]
    JumpOutOfRange { insn_index: usize, offset: i64 },
    #[error("the program has {len} instructions; the kernel allows at most {max}")]
    TooLong { len: usize, max: usize },
    #[error("the program is empty")]
    Empty,
    #[error("the program must end with exit, not with code {code:#04x}")]
    NoExit { code: u8 },
}

#[derive(Debug, Default)]
pub struct Builder {
    insns: Vec<Insn>,
    /// Where each label is bound: (instruction index, a second binding if any).
    labels: Vec<Option<usize>>,
    double_bound: Option<(usize, usize, usize)>,
    /// Jumps to patch: (instruction index, target label).
    fixups: Vec<(usize, Label)>,
    relocations: Vec<Relocation>,
    kfunc_calls: Vec<KfuncCall>,
    comments: Vec<(usize, String)>,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Number of instruction slots emitted so far.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    pub fn emit(&mut self, insn: Insn) {
        self.insns.push(insn);
    }

    /// Emits a two-slot instruction (`ld_imm64`).
    pub fn emit2(&mut self, insns: [Insn; 2]) {
        self.insns.extend(insns);
    }

    pub fn new_label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Binds `label` to the next instruction emitted.
    pub fn bind(&mut self, label: Label) {
        let here = self.insns.len();
        match self.labels.get_mut(label.0) {
            Some(slot @ None) => *slot = Some(here),
            Some(Some(first)) if self.double_bound.is_none() => {
                self.double_bound = Some((label.0, *first, here));
            }
            Some(Some(_)) => {}
            // A label of another builder: reported as unbound if it is used.
            None => {}
        }
    }

    /// `if dst op imm goto label` (64-bit compare).
    pub fn jmp_imm_to(&mut self, op: insn::JmpOp, dst: Reg, imm: i32, label: Label) {
        self.fixups.push((self.insns.len(), label));
        self.emit(insn::jmp_imm(op, dst, imm, 0));
    }

    /// `if dst op src goto label` (64-bit compare).
    pub fn jmp_reg_to(&mut self, op: insn::JmpOp, dst: Reg, src: Reg, label: Label) {
        self.fixups.push((self.insns.len(), label));
        self.emit(insn::jmp_reg(op, dst, src, 0));
    }

    /// `goto label`.
    pub fn ja_to(&mut self, label: Label) {
        self.fixups.push((self.insns.len(), label));
        self.emit(Insn::new(BPF_JMP | BPF_JA, 0, 0, 0, 0));
    }

    /// `dst = map[map_name]`, relocated by the loader.
    pub fn ld_map(&mut self, dst: Reg, map_name: &str) {
        self.relocations.push(Relocation { insn_index: self.insns.len(), map: map_name.to_string() });
        self.emit2(insn::ld_map_fd(dst));
    }

    /// `call kfunc`, its BTF id written in by the loader.
    pub fn call_kfunc(&mut self, kfunc: Kfunc) {
        self.kfunc_calls.push(KfuncCall { insn_index: self.insns.len(), kfunc });
        self.emit(kfunc_call());
    }

    /// Attaches `text` to the next instruction emitted.
    pub fn comment(&mut self, text: impl Into<String>) {
        self.comments.push((self.insns.len(), text.into()));
    }

    pub fn finish(mut self) -> Result<Program, BuildError> {
        if let Some((label, first, second)) = self.double_bound {
            return Err(BuildError::LabelBoundTwice { label, first, second });
        }
        let len = self.insns.len();
        for &(at, Label(label)) in &self.fixups {
            let target = self.labels.get(label).copied().flatten().ok_or(BuildError::UnboundLabel { label })?;
            if target >= len {
                return Err(BuildError::LabelPastEnd { label });
            }
            let offset = target as i64 - (at as i64 + 1);
            let off = i16::try_from(offset).map_err(|_| BuildError::JumpOutOfRange { insn_index: at, offset })?;
            self.insns[at].off = off;
        }
        if len > MAX_INSNS {
            return Err(BuildError::TooLong { len, max: MAX_INSNS });
        }
        let last = self.insns.last().ok_or(BuildError::Empty)?;
        if *last != insn::exit() {
            return Err(BuildError::NoExit { code: last.code });
        }
        Ok(Program {
            insns: self.insns,
            relocations: self.relocations,
            kfunc_calls: self.kfunc_calls,
            comments: self.comments,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::insn::*;

    #[test]
    fn resolves_forward_and_backward_labels() {
        let mut b = Builder::new();
        let top = b.new_label();
        let out = b.new_label();
        b.bind(top);
        b.emit(mov64_imm(R0, 0)); // 0
        b.jmp_imm_to(JmpOp::Eq, R0, 0, out); // 1 -> 5: +3
        b.ld_map(R1, "m"); // 2, 3
        b.ja_to(top); // 4 -> 0: -5
        b.bind(out);
        b.emit(exit()); // 5
        let p = b.finish().unwrap();
        assert_eq!(p.insns[1].off, 3);
        assert_eq!(p.insns[4].off, -5);
        assert_eq!(p.relocations, vec![Relocation { insn_index: 2, map: "m".into() }]);
    }

    #[test]
    fn reports_unbound_and_double_bound_labels() {
        let mut b = Builder::new();
        let l = b.new_label();
        b.ja_to(l);
        b.emit(exit());
        assert_eq!(b.finish(), Err(BuildError::UnboundLabel { label: 0 }));

        let mut b = Builder::new();
        let l = b.new_label();
        b.bind(l);
        b.emit(exit());
        b.bind(l);
        b.emit(exit());
        assert_eq!(b.finish(), Err(BuildError::LabelBoundTwice { label: 0, first: 0, second: 1 }));
    }

    #[test]
    fn label_at_end_is_an_error() {
        let mut b = Builder::new();
        let l = b.new_label();
        b.ja_to(l);
        b.emit(exit());
        b.bind(l);
        assert_eq!(b.finish(), Err(BuildError::LabelPastEnd { label: 0 }));
    }

    #[test]
    fn jump_too_far_is_an_error() {
        let mut b = Builder::new();
        let l = b.new_label();
        b.ja_to(l);
        for _ in 0..40_000 {
            b.emit(mov64_imm(R0, 0));
        }
        b.bind(l);
        b.emit(exit());
        assert_eq!(b.finish(), Err(BuildError::JumpOutOfRange { insn_index: 0, offset: 40_000 }));
    }

    #[test]
    fn must_end_with_exit_and_not_be_empty() {
        assert_eq!(Builder::new().finish(), Err(BuildError::Empty));
        let mut b = Builder::new();
        b.emit(mov64_imm(R0, 0));
        assert_eq!(b.finish(), Err(BuildError::NoExit { code: 0xb7 }));
    }

    #[test]
    fn too_long_is_an_error() {
        let mut b = Builder::new();
        for _ in 0..MAX_INSNS {
            b.emit(mov64_imm(R0, 0));
        }
        b.emit(exit());
        assert_eq!(b.finish(), Err(BuildError::TooLong { len: MAX_INSNS + 1, max: MAX_INSNS }));
    }

    #[test]
    fn comments_attach_to_the_next_instruction() {
        let mut b = Builder::new();
        b.emit(mov64_imm(R0, 0));
        b.comment("@n = count()");
        b.emit(exit());
        let p = b.finish().unwrap();
        assert_eq!(p.comments, vec![(1, "@n = count()".to_string())]);
    }
}
