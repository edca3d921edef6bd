//! The BPF ELF writer: objects built with the `Builder` are read back by aya-obj (the
//! parser aya loads with) and by the `object` crate, and, where the machine allows it,
//! loaded into the kernel so the verifier judges them.

mod support;

use gtrace::bpf::builder::{Builder, Program};
use gtrace::bpf::helpers::*;
use gtrace::bpf::insn::*;
use gtrace::object::{write, BpfObject, MapDef, ObjectError, ProgramCode};
use std::collections::{HashMap, HashSet};

const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_PERCPU_HASH: u32 = 5;
const BPF_MAP_TYPE_RINGBUF: u32 = 27;

fn map(name: &str, map_type: u32, key_size: u32, value_size: u32, max_entries: u32) -> MapDef {
    MapDef { name: name.into(), map_type, key_size, value_size, max_entries, map_flags: 0 }
}

/// `r0 = map_lookup_elem(map, r10 + key_off)`.
fn lookup(b: &mut Builder, map: &str, key_off: i32) {
    b.ld_map(R1, map);
    b.emit(mov64_reg(R2, R10));
    b.emit(alu64_imm(AluOp::Add, R2, key_off));
    b.emit(call(BPF_FUNC_map_lookup_elem));
}

/// A uprobe program as the compiler would emit it: counts calls per pid/tgid in a
/// per-CPU hash (lookup, then increment or insert), adds to a total in an array with an
/// atomic add, and sends the key through a ring buffer.
fn counting_program() -> Program {
    let mut b = Builder::new();
    let insert = b.new_label();
    let total = b.new_label();
    let skip_total = b.new_label();

    b.comment("on main.doWork { @calls[pid] = count() }");
    b.emit(mov64_reg(R6, R1));
    b.emit(call(BPF_FUNC_get_current_pid_tgid));
    b.emit(store_reg(Size::DW, R10, -8, R0));
    b.emit(mov64_reg(R1, R6));
    b.emit(call(BPF_FUNC_get_attach_cookie));
    b.emit(store_reg(Size::DW, R10, -24, R0));
    lookup(&mut b, "calls", -8);
    b.jmp_imm_to(JmpOp::Eq, R0, 0, insert);
    b.emit(load(Size::DW, R1, R0, 0));
    b.emit(alu64_imm(AluOp::Add, R1, 1));
    b.emit(store_reg(Size::DW, R0, 0, R1));
    b.ja_to(total);

    b.bind(insert);
    b.emit(store_imm(Size::DW, R10, -16, 1));
    b.ld_map(R1, "calls");
    b.emit(mov64_reg(R2, R10));
    b.emit(alu64_imm(AluOp::Add, R2, -8));
    b.emit(mov64_reg(R3, R10));
    b.emit(alu64_imm(AluOp::Add, R3, -16));
    b.emit(mov64_imm(R4, BPF_ANY));
    b.emit(call(BPF_FUNC_map_update_elem));

    b.bind(total);
    b.comment("@total = sum(1)");
    b.emit(store_imm(Size::W, R10, -28, 0));
    lookup(&mut b, "total", -28);
    b.jmp_imm_to(JmpOp::Eq, R0, 0, skip_total);
    b.emit(mov64_imm(R1, 1));
    b.emit(atomic_add(Size::DW, R0, 0, R1));

    b.bind(skip_total);
    b.comment("print(pid)");
    b.ld_map(R1, "events");
    b.emit(mov64_reg(R2, R10));
    b.emit(alu64_imm(AluOp::Add, R2, -8));
    b.emit(mov64_imm(R3, 8));
    b.emit(mov64_imm(R4, 0));
    b.emit(call(BPF_FUNC_ringbuf_output));
    b.emit(mov64_imm(R0, 0));
    b.emit(exit());
    b.finish().expect("the sample program builds")
}

/// A perf_event program (as a timer would be): counts ticks in the array.
fn tick_program() -> Program {
    let mut b = Builder::new();
    let out = b.new_label();
    b.emit(store_imm(Size::W, R10, -4, 0));
    lookup(&mut b, "total", -4);
    b.jmp_imm_to(JmpOp::Eq, R0, 0, out);
    b.emit(mov64_imm(R1, 1));
    b.emit(atomic_add(Size::DW, R0, 0, R1));
    b.bind(out);
    b.emit(mov64_imm(R0, 0));
    b.emit(exit());
    b.finish().expect("the tick program builds")
}

fn sample() -> BpfObject {
    BpfObject {
        license: "GPL".into(),
        maps: vec![
            map("calls", BPF_MAP_TYPE_PERCPU_HASH, 8, 8, 1024),
            map("total", BPF_MAP_TYPE_ARRAY, 4, 8, 1),
            map("events", BPF_MAP_TYPE_RINGBUF, 0, 0, 1 << 16),
        ],
        programs: vec![
            ProgramCode { name: "count".into(), section: "uprobe/p0".into(), program: counting_program() },
            ProgramCode { name: "tick".into(), section: "perf_event/t0".into(), program: tick_program() },
        ],
    }
}

fn insns_of(function: &aya_obj::Function) -> Vec<Insn> {
    function.instructions.iter().map(|i| Insn::new(i.code, i.dst_reg(), i.src_reg(), i.off, i.imm)).collect()
}

#[test]
fn aya_obj_reads_back_programs_maps_and_relocations() {
    let object = sample();
    let bytes = write(&object).unwrap();
    let mut parsed = aya_obj::Object::parse(&bytes).unwrap();

    assert_eq!(parsed.license.to_str().unwrap(), "GPL");
    assert!(parsed.btf.is_none());

    // Maps: every definition as written, in the legacy `maps` section.
    assert_eq!(parsed.maps.len(), 3);
    for def in &object.maps {
        let m = &parsed.maps[&def.name];
        assert!(matches!(m, aya_obj::Map::Legacy(_)), "{} is not legacy", def.name);
        assert_eq!(m.section_kind(), aya_obj::EbpfSectionKind::Maps);
        assert_eq!(
            (m.map_type(), m.key_size(), m.value_size(), m.max_entries(), m.map_flags()),
            (def.map_type, def.key_size, def.value_size, def.max_entries, def.map_flags),
            "{}",
            def.name
        );
    }

    // Programs: their kinds from the section names.
    assert_eq!(parsed.programs.len(), 2);
    assert!(matches!(parsed.programs["count"].section, aya_obj::ProgramSection::UProbe { sleepable: false }));
    assert!(matches!(parsed.programs["tick"].section, aya_obj::ProgramSection::PerfEvent));

    // Instructions, byte for byte as built.
    let function = |parsed: &aya_obj::Object, name: &str| {
        parsed.functions.values().find(|f| f.name == name).map(insns_of).unwrap()
    };
    for code in &object.programs {
        assert_eq!(function(&parsed, &code.name), code.program.insns, "{}", code.name);
    }

    // Relocations: give each map a made-up fd, let aya-obj patch the map loads, and
    // see every `ld_map` of the builder now holds its own map's fd, nothing else changed.
    let fds: HashMap<&str, i32> = [("calls", 100), ("total", 101), ("events", 102)].into();
    let maps: Vec<(String, aya_obj::Map)> = parsed.maps.clone().into_iter().collect();
    parsed.relocate_maps(maps.iter().map(|(n, m)| (n.as_str(), fds[n.as_str()], m)), &HashSet::new()).unwrap();
    for code in &object.programs {
        let mut expected = code.program.insns.clone();
        for r in &code.program.relocations {
            expected[r.insn_index].imm = fds[r.map.as_str()];
        }
        assert_eq!(function(&parsed, &code.name), expected, "{}", code.name);
    }
    assert_eq!(object.programs[0].program.relocations.len(), 4);
}

#[test]
fn the_elf_is_what_clang_would_write() {
    use object::{Object, ObjectSection, ObjectSymbol, RelocationFlags, SymbolKind};
    let bytes = write(&sample()).unwrap();
    let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(bytes.as_slice()).unwrap();
    assert_eq!(elf.elf_header().e_machine.get(object::Endianness::Little), object::elf::EM_BPF);
    assert_eq!(elf.elf_header().e_type.get(object::Endianness::Little), object::elf::ET_REL);
    assert!(elf.is_little_endian() && elf.is_64());

    let license = elf.section_by_name("license").unwrap();
    assert_eq!(license.data().unwrap(), b"GPL\0");
    let maps = elf.section_by_name("maps").unwrap();
    assert_eq!(maps.size(), 3 * 20);
    let first: Vec<u32> =
        maps.data().unwrap()[..20].chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(first, [BPF_MAP_TYPE_PERCPU_HASH, 8, 8, 1024, 0]);

    let symbols: HashMap<String, _> = elf.symbols().map(|s| (s.name().unwrap().to_string(), s)).collect();
    for (name, offset) in [("calls", 0), ("total", 20), ("events", 40)] {
        let s = &symbols[name];
        assert_eq!((s.kind(), s.address(), s.size(), s.is_global()), (SymbolKind::Data, offset, 20, true), "{name}");
        assert_eq!(s.section_index(), Some(maps.index()));
    }
    let count = &symbols["count"];
    let text = elf.section_by_name("uprobe/p0").unwrap();
    assert_eq!(text.kind(), object::SectionKind::Text);
    assert_eq!((count.kind(), count.size(), count.is_global()), (SymbolKind::Text, text.size(), true));

    let program = counting_program();
    let relocations: Vec<(u64, String, u32)> = text
        .relocations()
        .map(|(offset, r)| {
            let object::RelocationTarget::Symbol(index) = r.target() else { panic!("{r:?}") };
            let name = elf.symbol_by_index(index).unwrap().name().unwrap().to_string();
            let RelocationFlags::Elf { r_type } = r.flags() else { panic!("{r:?}") };
            (offset, name, r_type)
        })
        .collect();
    let expected: Vec<(u64, String, u32)> = program
        .relocations
        .iter()
        .map(|r| (r.insn_index as u64 * 8, r.map.clone(), object::elf::R_BPF_64_64))
        .collect();
    assert_eq!(relocations, expected);
}

#[test]
fn writer_rejects_what_no_loader_could_use() {
    let err = |f: fn(&mut BpfObject)| {
        let mut o = sample();
        f(&mut o);
        write(&o).unwrap_err()
    };
    assert!(matches!(err(|o| { o.maps.remove(0); }), ObjectError::UnknownMap { map, .. } if map == "calls"));
    assert!(
        matches!(err(|o| o.maps[1].name = "calls".into()), ObjectError::DuplicateSymbol { name } if name == "calls")
    );
    assert!(matches!(err(|o| o.programs[1].name = "events".into()), ObjectError::DuplicateSymbol { .. }));
    assert!(matches!(err(|o| o.programs[1].section = "uprobe/p0".into()), ObjectError::BadSection { .. }));
    assert!(matches!(err(|o| o.programs[1].section = "maps".into()), ObjectError::BadSection { .. }));
    assert!(matches!(
        err(|o| o.programs[0].program.relocations[0].insn_index = 0),
        ObjectError::BadRelocation { insn_index: 0, .. }
    ));
    assert!(matches!(err(|o| o.license = "G\0PL".into()), ObjectError::BadLicense { .. }));
    assert!(matches!(err(|o| o.maps[0].name.clear()), ObjectError::EmptyName));
}

// ---------------------------------------------------------------------------------
// THE ONE PLACE OUTSIDE src/runtime/ THAT CALLS AYA: it loads the written object
// into the kernel so the verifier judges it. It needs root (CAP_BPF); without it it
// prints SKIP, unless CI=true, where it fails.
// ---------------------------------------------------------------------------------

/// True when this process may not load BPF (then the test says SKIP, or fails on CI).
/// Decided by the process's privileges, never by the error: the kernel answers EACCES
/// for a verifier rejection too, and a rejection must never pass for "no permission".
fn unprivileged(what: &str, e: &(dyn std::error::Error + 'static)) -> bool {
    if support::can_load_bpf() {
        return false;
    }
    support::skip(what, &format!("no permission to load BPF ({e}); run as root to test the verifier"));
    true
}

#[test]
fn kernel_verifier_accepts_the_object() {
    use aya::programs::{PerfEvent, UProbe};
    let bytes = write(&sample()).unwrap();
    let mut ebpf = match aya::EbpfLoader::new().load(&bytes) {
        Ok(ebpf) => ebpf,
        Err(e) if unprivileged("creating maps", &e) => return,
        Err(e) => panic!("aya could not load the object: {e}: {e:?}"),
    };
    for name in ["calls", "total", "events"] {
        assert!(ebpf.map(name).is_some(), "map {name}");
    }

    let uprobe: &mut UProbe = ebpf.program_mut("count").expect("program count").try_into().unwrap();
    match uprobe.load() {
        Ok(()) => {}
        Err(e) if unprivileged("loading count", &e) => return,
        Err(e) => panic!("the verifier rejected count: {e}: {e:?}"),
    }
    let tick: &mut PerfEvent = ebpf.program_mut("tick").expect("program tick").try_into().unwrap();
    if let Err(e) = tick.load() {
        panic!("the verifier rejected tick: {e}: {e:?}");
    }
}

#[test]
fn kernel_verifier_rejects_a_broken_program() {
    // The same object with the lookup's null check made a check of the context pointer
    // instead must be refused: proves the test above really reaches the verifier.
    use aya::programs::UProbe;
    let mut object = sample();
    let insns = &mut object.programs[0].program.insns;
    let check = insns.iter().position(|i| i.code == BPF_JMP | BPF_JEQ | BPF_K && i.dst == R0.num()).unwrap();
    insns[check].dst = R6.num();
    let bytes = write(&object).unwrap();
    let mut ebpf = match aya::EbpfLoader::new().load(&bytes) {
        Ok(ebpf) => ebpf,
        Err(e) if unprivileged("creating maps", &e) => return,
        Err(e) => panic!("aya could not load the object: {e}"),
    };
    let uprobe: &mut UProbe = ebpf.program_mut("count").unwrap().try_into().unwrap();
    match uprobe.load() {
        Ok(()) => panic!("the verifier accepted a dereference of a possibly-null map value"),
        Err(e) if unprivileged("loading count", &e) => {}
        // Privileged, any refusal (the kernel says EACCES) must be the verifier's, by its log.
        Err(aya::programs::ProgramError::LoadError { verifier_log, .. }) => {
            assert!(verifier_log.to_string().contains("map_value_or_null"), "{verifier_log}");
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}
