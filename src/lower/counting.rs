//! gtrace's own accounting as code in each program (accounting.rs lays out the
//! counters, generations and rate buckets): adding one to a counter, the hit and
//! generation check at a program's start, `--rate N`'s token bucket, and counting a map
//! update the kernel refused under its cause.

use super::accounting::{COUNTERS, GENERATIONS, HANDOVERS, RATE};
use super::codegen::Gen;
use super::ir::{conv, Arg};
use super::LowerError;
use crate::bpf::builder::Label;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::plan::{Counter, Refusal, COOKIE_GEN_SHIFT, COOKIE_SLOT_MASK, COOKIE_SLOT_SHIFT, GEN_HANDOVER};
use crate::syntax::ast::Span;

impl Gen<'_> {
    /// Adds one to `counter` (a no-op for a program generated without accounting).
    /// Clobbers R0-R5.
    pub fn count(&mut self, counter: Counter, span: Span) -> Result<(), LowerError> {
        let Some(acct) = self.acct.as_mut() else { return Ok(()) };
        let slot = acct.layout.slot(counter);
        let mark = self.b.frame.mark();
        let key = self.slot(8, span)?;
        self.b.emit(store_imm(Size::W, R10, key, slot as i32));
        self.add_one_at(key);
        self.b.frame.release(mark);
        Ok(())
    }

    /// counters[*(u32 *)(r10 + key)] += 1, atomically.
    fn add_one_at(&mut self, key: i16) {
        let out = self.b.new_label();
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(COUNTERS), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, out);
        self.b.emit(mov64_imm(R1, 1));
        self.b.emit(atomic_add(Size::DW, R0, 0, R1));
        self.b.bind(out);
        self.b.emit(mov64_imm(R0, 0));
    }

    /// The start of a uprobe program with accounting: count the site's hit, but first,
    /// for a program at several functions, return at once when the cookie's generation
    /// is not the live one of the site's function (`generations`, indexed like the hit
    /// counters). Nothing without accounting, nor for a program at one function whose
    /// hits the kernel counts as its runs (`Layout::hits_by_kernel`; `scoped`: behind
    /// `--cgroup`'s check, which it is not then).
    pub fn accounting_prologue(&mut self, functions: usize, scoped: bool, span: Span) -> Result<(), LowerError> {
        let Some(acct) = self.acct.as_mut() else { return Ok(()) };
        if !acct.layout.hits() || acct.layout.hits_by_kernel(&acct.program, functions, scoped) {
            return Ok(());
        }
        let generations = functions > 1;
        if generations {
            let program = acct.program.clone();
            acct.layout.checks_generations(&program);
        }
        self.b.comment("accounting: the live generation, the site's hit");
        let mark = self.b.frame.mark();
        let key = self.slot(8, span)?;
        self.b.call(BPF_FUNC_get_attach_cookie, &[conv::CTX.into()]);
        let cookie = self.b.vreg();
        self.b.op(mov64_reg(R0, R0), cookie, R0);
        self.b.emit(mov64_reg(R1, R0));
        self.b.emit(alu64_imm(AluOp::Rsh, R1, COOKIE_SLOT_SHIFT as i32));
        self.b.emit(alu64_imm(AluOp::And, R1, COOKIE_SLOT_MASK as i32));
        self.b.emit(store_reg(Size::W, R10, key, R1));
        if generations {
            self.generation_check(key, cookie, span)?;
        }
        self.add_one_at(key);
        self.b.frame.release(mark);
        Ok(())
    }

    /// Returns at once unless this site's link is the one that counts this hit.
    /// `generations[slot]` holds the live generation `L` of the function's link, with
    /// `GEN_HANDOVER` set while the link is being replaced by one of generation `L+1`.
    /// Steady, a link counts when it is `L`. In a handover both links fire at each hit,
    /// the newer first (the kernel runs a uprobe's newest consumer first): it claims the
    /// hit, writing its cookie's slot and generation under the task (`handovers`), and
    /// counts unless that write failed; the older one counts unless the task's claim is
    /// its successor's. So one decision per hit, however the two interleave with the
    /// runtime's updates. Clobbers R0-R5.
    fn generation_check(&mut self, key: i16, cookie: crate::lower::ir::VReg, span: Span) -> Result<(), LowerError> {
        let (counts, older) = (self.b.new_label(), self.b.new_label());
        let task = self.slot(8, span)?;
        let claim = self.slot(8, span)?;
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(GENERATIONS), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, self.done);
        self.b.emit(load(Size::DW, R1, R0, 0));
        self.b.op(mov64_reg(R2, R0), R2, cookie);
        self.b.emit(alu64_imm(AluOp::Rsh, R2, COOKIE_GEN_SHIFT as i32));
        self.b.jmp_reg_to(JmpOp::Eq, R1, R2, counts);
        self.b.emit(mov64_reg(R3, R1));
        self.b.emit(alu64_imm(AluOp::And, R3, GEN_HANDOVER as i32));
        self.b.jmp_imm_to(JmpOp::Eq, R3, 0, self.done);
        self.b.emit(alu64_imm(AluOp::And, R1, 0xff));
        self.b.jmp_reg_to(JmpOp::Eq, R1, R2, older);
        self.b.emit(alu64_imm(AluOp::Add, R1, 1));
        self.b.emit(alu64_imm(AluOp::And, R1, 0xff));
        self.b.jmp_reg_to(JmpOp::Ne, R1, R2, self.done);
        // The newer link: claim the hit.
        self.b.call(BPF_FUNC_get_current_pid_tgid, &[]);
        self.b.emit(store_reg(Size::DW, R10, task, R0));
        self.b.op(mov64_reg(R1, R0), R1, cookie);
        self.b.emit(alu64_imm(AluOp::Rsh, R1, COOKIE_SLOT_SHIFT as i32));
        self.b.emit(store_reg(Size::DW, R10, claim, R1));
        let args = [Arg::Map(HANDOVERS), Arg::Stack(task), Arg::Stack(claim), Arg::Imm(BPF_ANY)];
        self.b.call(BPF_FUNC_map_update_elem, &args);
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, self.done);
        self.b.ja_to(counts);
        // The older link: counts unless its successor claimed this hit.
        self.b.bind(older);
        self.b.call(BPF_FUNC_get_current_pid_tgid, &[]);
        self.b.emit(store_reg(Size::DW, R10, task, R0));
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(HANDOVERS), Arg::Stack(task)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, counts);
        self.b.emit(load(Size::DW, R1, R0, 0));
        self.b.op(mov64_reg(R2, R0), R2, cookie);
        self.b.emit(alu64_imm(AluOp::Rsh, R2, COOKIE_SLOT_SHIFT as i32));
        self.b.emit(alu64_imm(AluOp::Add, R2, 1 << (COOKIE_GEN_SHIFT - COOKIE_SLOT_SHIFT)));
        // Within 32 bits: the generation wraps as a u8.
        self.b.emit(alu64_imm(AluOp::Lsh, R2, 32));
        self.b.emit(alu64_imm(AluOp::Rsh, R2, 32));
        self.b.jmp_reg_to(JmpOp::Eq, R1, R2, self.done);
        self.b.bind(counts);
        Ok(())
    }

    /// With `--rate N`: takes a token from this probe's bucket, or counts the event as
    /// dropped and jumps to `skip`. Clobbers R0-R5 and R9.
    pub fn rate_limit(&mut self, skip: Label, span: Span) -> Result<(), LowerError> {
        let Some(acct) = self.acct.as_mut() else { return Ok(()) };
        let Some(rate) = acct.layout.rate() else { return Ok(()) };
        let bucket = acct.layout.rate_bucket(acct.item);
        let program = acct.program.clone();
        // GCRA: each event moves the time the bucket is full again (`tat`) one interval
        // later; an event that would move it more than a second (the burst: N events)
        // past now is dropped.
        let interval = (1_000_000_000 / u64::from(rate.max(1))).max(1);
        let burst = interval * u64::from(rate.max(1));
        let dropped = self.b.new_label();
        let allowed = self.b.new_label();
        self.b.comment(format!("--rate {rate}: a token from this probe's bucket"));
        let mark = self.b.frame.mark();
        let key = self.slot(8, span)?;
        self.b.emit(store_imm(Size::W, R10, key, bucket as i32));
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(RATE), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, dropped);
        self.b.emit(mov64_reg(R9, R0));
        self.b.call(BPF_FUNC_ktime_get_ns, &[]);
        self.b.emit(mov64_reg(R5, R0));
        self.b.emit(load(Size::DW, R1, R9, 0));
        // Two tries: another CPU may take a token between the read and the swap.
        for _ in 0..2 {
            let later = self.b.new_label();
            self.b.emit(mov64_reg(R2, R1));
            self.b.jmp_reg_to(JmpOp::Ge, R2, R5, later);
            self.b.emit(mov64_reg(R2, R5));
            self.b.bind(later);
            self.b.emit2(ld_imm64(R3, interval));
            self.b.emit(alu64_reg(AluOp::Add, R2, R3));
            self.b.emit(mov64_reg(R3, R2));
            self.b.emit(alu64_reg(AluOp::Sub, R3, R5));
            self.b.emit2(ld_imm64(R4, burst));
            self.b.jmp_reg_to(JmpOp::Gt, R3, R4, dropped);
            self.b.emit(mov64_reg(R0, R1));
            self.b.emit(atomic_cmpxchg(Size::DW, R9, 0, R2));
            self.b.jmp_reg_to(JmpOp::Eq, R0, R1, allowed);
            self.b.emit(mov64_reg(R1, R0));
        }
        self.b.bind(dropped);
        self.b.frame.release(mark);
        self.count(Counter::RateDropped { program }, span)?;
        self.b.ja_to(skip);
        self.b.bind(allowed);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// After a `bpf_map_update_elem` of `map`: counts a refusal (R0 != 0) under its
    /// cause.
    pub fn count_refused_update(&mut self, map: &str, span: Span) -> Result<(), LowerError> {
        let ok = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, ok);
        self.count_refused(map, span)?;
        self.b.bind(ok);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// Counts an update of `map` that the kernel refused, under the cause R0 says (what
    /// `bpf_map_update_elem` returned: minus the errno). Clobbers R0-R5.
    pub fn count_refused(&mut self, map: &str, span: Span) -> Result<(), LowerError> {
        let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) else { return Ok(()) };
        let counted = self.b.new_label();
        for why in Refusal::ALL {
            let next = self.b.new_label();
            let errno = why.errno();
            if let Some(errno) = errno {
                self.b.jmp_imm_to(JmpOp::Ne, R0, -errno, next);
            }
            self.count(Counter::Refused { program: program.clone(), map: map.to_string(), why }, span)?;
            if errno.is_some() {
                self.b.ja_to(counted);
                self.b.bind(next);
                self.b.emit(mov64_imm(R5, 0));
            }
        }
        self.b.bind(counted);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }
}
