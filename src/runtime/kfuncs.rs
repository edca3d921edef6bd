//! Linking the object's kfunc calls to the running kernel (bpf/kfuncs.rs): each call is
//! relocated (`R_BPF_64_32`) against an undefined symbol naming the function, and the
//! kernel wants its BTF id in the instruction's `imm`. aya 0.14 does not relocate kfunc
//! calls (aya-obj 0.3 links only BPF-to-BPF calls and maps), so the ids are read here
//! from the kernel's BTF (/sys/kernel/btf/vmlinux, walked by btfscan.rs) and written
//! into a copy of the object before aya or the multi-uprobe loader sees it. A kernel
//! without one of the preemption guards (before 6.10, or without BTF) gets a no-op in
//! its place (`goto +0`, which the verifier removes); `Linked::missing` says which.

use super::error::RuntimeError;
use crate::bpf::kfuncs::Kfunc;
use aya_obj::btf::{Btf, BtfKind};
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The BTF ids of the kfuncs gtrace calls, in the running kernel (absent: it has none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelKfuncs {
    ids: BTreeMap<Kfunc, u32>,
}

impl KernelKfuncs {
    /// Looks each of gtrace's kfuncs up in `btf` (a kernel's vmlinux BTF).
    pub fn from_btf(btf: &Btf) -> KernelKfuncs {
        let ids = Kfunc::ALL
            .into_iter()
            .filter_map(|k| Some((k, btf.id_by_type_name_kind(k.name(), BtfKind::Func).ok()?)))
            .collect();
        KernelKfuncs { ids }
    }

    pub fn id(&self, kfunc: Kfunc) -> Option<u32> {
        self.ids.get(&kfunc).copied()
    }

    /// Whether programs run with preemption off (both guards are there).
    pub fn guards_preemption(&self) -> bool {
        self.id(Kfunc::PreemptDisable).is_some() && self.id(Kfunc::PreemptEnable).is_some()
    }
}

/// Set (to anything) to load the programs as on a kernel without the preemption guards
/// (their calls no-ops): for showing what the guards prevent (tests/vm's stress).
pub const DISABLE_ENV: &str = "GTRACE_NO_PREEMPT_GUARD";

/// Where the running kernel's BTF is.
const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

/// The running kernel's kfuncs, read once (the first caller walks the BTF's types,
/// btfscan.rs, or parses it with aya-obj when the walk cannot read it; `loader::prewarm`
/// starts that early on its own thread).
pub fn kernel() -> &'static KernelKfuncs {
    static KERNEL: OnceLock<KernelKfuncs> = OnceLock::new();
    KERNEL.get_or_init(|| {
        if std::env::var_os(DISABLE_ENV).is_some() {
            return KernelKfuncs::default();
        }
        let names = Kfunc::ALL.map(Kfunc::name);
        let walked = vmlinux_func_ids(&names);
        match walked {
            Some(ids) => {
                KernelKfuncs { ids: Kfunc::ALL.into_iter().zip(ids).filter_map(|(k, id)| Some((k, id?))).collect() }
            }
            None => Btf::from_sys_fs().map(|btf| KernelKfuncs::from_btf(&btf)).unwrap_or_default(),
        }
    })
}

/// The ids of the FUNCs `names` in the running kernel's BTF, walked (btfscan.rs) in a
/// mapping of the file where the kernel allows one (6.16 and later), else in a copy:
/// a 5 MB buffer freed raises malloc's threshold for mapping big blocks, and what the
/// compiler allocates after stays in the heap (4 MB more peak RSS, measured).
fn vmlinux_func_ids(names: &[&str]) -> Option<Vec<Option<u32>>> {
    let file = std::fs::File::open(VMLINUX).ok()?;
    let len = file.metadata().ok()?.len();
    match super::mapped::Mapped::map(&file, len) {
        Ok(map) => super::btfscan::func_ids(map.bytes(), names),
        Err(_) => super::btfscan::func_ids(&std::fs::read(VMLINUX).ok()?, names),
    }
}

/// The object with its kfunc calls linked, and the kfuncs the kernel lacks (their calls
/// made no-ops).
#[derive(Debug)]
pub struct Linked {
    pub object: Vec<u8>,
    pub missing: Vec<Kfunc>,
}

/// `goto +0`: what a call of a missing optional kfunc becomes.
const NOP: [u8; 8] = [0x05, 0, 0, 0, 0, 0, 0, 0];
const INSN_SIZE: u64 = 8;

/// Writes the kernel's BTF id into every kfunc call of `object` (see the module's doc).
pub fn link(object: &[u8], kernel: &KernelKfuncs) -> Result<Linked, RuntimeError> {
    let bad = |function: &str, problem: &'static str| RuntimeError::Kfunc { function: function.to_string(), problem };
    let file = object::File::parse(object).map_err(|_| bad("?", "the object cannot be read"))?;
    let mut out = object.to_vec();
    let mut missing = Vec::new();
    for section in file.sections() {
        let Some((start, size)) = section.file_range() else { continue };
        for (offset, reloc) in section.relocations() {
            if reloc.flags() != (object::RelocationFlags::Elf { r_type: object::elf::R_BPF_64_32 }) {
                continue;
            }
            let RelocationTarget::Symbol(index) = reloc.target() else { continue };
            let name = file.symbol_by_index(index).and_then(|s| s.name()).unwrap_or("?");
            let kfunc = Kfunc::by_name(name).ok_or_else(|| bad(name, "gtrace calls no such kernel function"))?;
            if offset % INSN_SIZE != 0 || offset + INSN_SIZE > size {
                return Err(bad(name, "its relocation is not at an instruction"));
            }
            let at = usize::try_from(start + offset).map_err(|_| bad(name, "its relocation is out of the file"))?;
            let insn = out.get_mut(at..at + 8).ok_or_else(|| bad(name, "its relocation is out of the file"))?;
            match kernel.id(kfunc) {
                Some(id) => insn[4..8].copy_from_slice(&id.to_le_bytes()),
                None if kfunc.optional() => {
                    insn.copy_from_slice(&NOP);
                    if !missing.contains(&kfunc) {
                        missing.push(kfunc);
                    }
                }
                None => return Err(bad(name, "this kernel does not have it")),
            }
        }
    }
    Ok(Linked { object: out, missing })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::builder::Builder;
    use crate::bpf::insn::{decode_all, exit, mov64_imm, Insn, R0};
    use crate::object::{write, BpfObject, ProgramCode, LICENSE};

    /// An object of two guarded programs, and where each one's instructions are in it.
    fn guarded_object() -> (Vec<u8>, Vec<(u64, u64)>) {
        let program = || {
            let mut b = Builder::new();
            b.call_kfunc(Kfunc::PreemptDisable);
            b.emit(mov64_imm(R0, 0));
            b.call_kfunc(Kfunc::PreemptEnable);
            b.emit(exit());
            b.finish().unwrap()
        };
        let programs = ["p0", "p1"]
            .map(|n| ProgramCode { name: n.into(), section: format!("uprobe/{n}"), program: program() })
            .to_vec();
        let bytes = write(&BpfObject { license: LICENSE.into(), maps: Vec::new(), programs }).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let ranges = ["uprobe/p0", "uprobe/p1"].map(|s| file.section_by_name(s).unwrap().file_range().unwrap());
        (bytes, ranges.to_vec())
    }

    fn insns(object: &[u8], (at, len): (u64, u64)) -> Vec<Insn> {
        decode_all(&object[at as usize..(at + len) as usize]).unwrap()
    }

    #[test]
    fn the_kernels_ids_are_written_into_every_call() {
        let (object, ranges) = guarded_object();
        let kernel = KernelKfuncs {
            ids: [(Kfunc::PreemptDisable, 51_234), (Kfunc::PreemptEnable, 51_235)].into_iter().collect(),
        };
        let linked = link(&object, &kernel).unwrap();
        assert!(linked.missing.is_empty());
        for range in ranges {
            let got = insns(&linked.object, range);
            assert_eq!((got[0].src, got[0].imm), (2, 51_234));
            assert_eq!((got[2].src, got[2].imm), (2, 51_235));
            assert_eq!(got[1], mov64_imm(R0, 0));
        }
        // Nothing else of the object changes.
        let changed = object.iter().zip(&linked.object).filter(|(a, b)| a != b).count();
        assert!(changed <= 4 * 4, "{changed} bytes changed");
    }

    #[test]
    fn a_kernel_without_the_guards_gets_no_ops_and_says_so() {
        let (object, ranges) = guarded_object();
        let linked = link(&object, &KernelKfuncs::default()).unwrap();
        assert_eq!(linked.missing, vec![Kfunc::PreemptDisable, Kfunc::PreemptEnable]);
        let nop = Insn::new(0x05, 0, 0, 0, 0);
        for range in ranges {
            let got = insns(&linked.object, range);
            assert_eq!(got, vec![nop, mov64_imm(R0, 0), nop, exit()]);
        }
    }

    #[test]
    fn the_running_kernel_has_the_guards_from_6_10_on() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut parts = release.trim().split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
        let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        let has_btf = std::path::Path::new("/sys/kernel/btf/vmlinux").exists();
        let disabled = std::env::var_os(DISABLE_ENV).is_some();
        assert_eq!(kernel().guards_preemption(), has_btf && version >= (6, 10) && !disabled, "kernel {release}");
    }
}
