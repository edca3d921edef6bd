//! `--cgroup`: the first thing every program attached to the target does. It asks the
//! kernel whether the current task is in the cgroup the runtime put in the cgroup array
//! `cgroup`, or in a cgroup below it (`bpf_current_task_under_cgroup`: a Kubernetes
//! pod's processes live in its containers' cgroups, one level down), and returns at once
//! when it is not, before the script's accounting: such a hit is not a hit of the script.
//! With accounting on it is counted apart (`Counter::OtherCgroup`), because its trap is
//! paid all the same. An empty array (no cgroup put there) lets nothing through.

use super::codegen::Gen;
use super::ir::Arg;
use super::LowerError;
use crate::bpf::helpers::BPF_FUNC_current_task_under_cgroup;
use crate::bpf::insn::*;
use crate::plan::{Counter, MapKind, MapRole, MapSpec};
use crate::syntax::ast::Span;

/// The cgroup array's object name.
pub const CGROUP: &str = "cgroup";

/// The cgroup array: one slot, the cgroup's directory fd.
pub fn map_spec() -> MapSpec {
    MapSpec {
        object_name: CGROUP.into(),
        kind: MapKind::CgroupArray,
        key_size: 4,
        value_size: 4,
        max_entries: 1,
        role: MapRole::Scratch,
    }
}

impl Gen<'_> {
    /// Returns at once unless the current task is under the cgroup; counts the hit as
    /// another cgroup's when sites count their hits. Clobbers R0-R5.
    pub fn cgroup_prologue(&mut self, span: Span) -> Result<(), LowerError> {
        self.b.comment("--cgroup: return at once for a task outside the cgroup");
        let inside = self.b.new_label();
        self.b.call(BPF_FUNC_current_task_under_cgroup, &[Arg::Map(CGROUP), Arg::Imm(0)]);
        // 1: under it; 0: not; negative: no cgroup in the array.
        self.b.jmp_imm_to(JmpOp::Eq, R0, 1, inside);
        let counted = self.acct.as_ref().filter(|a| a.layout.hits()).map(|a| a.program.clone());
        if let Some(program) = counted {
            self.count(Counter::OtherCgroup { program }, span)?;
        }
        self.b.ja_to(self.done);
        self.b.bind(inside);
        Ok(())
    }
}
