//! What the budget can detach alone (a unit) and how the plan's ties join units: one
//! probe at one function (the sites of a program attached at several functions count
//! apart, their link replaced by a smaller one without a hit missed or counted twice),
//! or a whole program, with whatever must go with it (`plan::Accounting::ties`: a return
//! probe using `elapsed` and the timing of its entries; every probe sharing `self`
//! variables). A wildcard of thousands of functions has thousands of units and ties:
//! every step here is a lookup, never a scan of all units.

use crate::plan::{Plan, ProbeAttach, SiteRef};
use std::collections::{BTreeSet, HashMap};

/// What can be detached alone.
#[derive(Clone, Debug)]
pub(crate) struct Unit {
    pub sites: Vec<SiteRef>,
    pub attached: bool,
}

/// The units of `plan`'s probes, tied ones joined, and the programs attached at several
/// functions whose sites count apart.
pub(crate) fn units(plan: &Plan) -> (Vec<Unit>, Vec<String>) {
    let acct = &plan.accounting;
    let mut units: Vec<Unit> = Vec::new();
    let mut shared = Vec::new();
    for probe in &plan.probes {
        let ProbeAttach::Uprobe(points) = &probe.attach else { continue };
        let mut functions: Vec<&str> = points.iter().map(|p| p.function.as_str()).collect();
        functions.sort();
        functions.dedup();
        let program = probe.program.clone();
        // Sites of one program count and detach apart only when the program checks
        // its generation (its link can be replaced exactly).
        if acct.hits && functions.len() > 1 && acct.checks_generations(&program) {
            shared.push(program.clone());
            for f in functions {
                let site = SiteRef { program: program.clone(), function: Some(f.to_string()) };
                units.push(Unit { sites: vec![site], attached: true });
            }
        } else {
            units.push(Unit { sites: vec![SiteRef { program, function: None }], attached: true });
        }
    }
    (merge_ties(units, &acct.ties), shared)
}

/// Where each site is: the unit holding a (program, function) site, or a whole
/// program's (function `None`), and every unit holding a site of a program.
#[derive(Default)]
struct Index {
    at: HashMap<(String, Option<String>), usize>,
    of_program: HashMap<String, BTreeSet<usize>>,
}

impl Index {
    fn put(&mut self, site: &SiteRef, unit: usize) {
        self.at.insert((site.program.clone(), site.function.clone()), unit);
        self.of_program.entry(site.program.clone()).or_default().insert(unit);
    }

    fn forget(&mut self, site: &SiteRef, unit: usize) {
        if let Some(units) = self.of_program.get_mut(&site.program) {
            units.remove(&unit);
        }
    }

    /// The units holding a site that `t` names: the same function's, a whole program's,
    /// or (for `t` without a function) every unit of the program.
    fn covered_by(&self, t: &SiteRef, out: &mut BTreeSet<usize>) {
        match &t.function {
            Some(_) => {
                out.extend(self.at.get(&(t.program.clone(), t.function.clone())));
                out.extend(self.at.get(&(t.program.clone(), None)));
            }
            None => out.extend(self.of_program.get(&t.program).into_iter().flatten()),
        }
    }
}

/// Joins, tie by tie, every unit that holds a site of the tie into one, placed after the
/// others, the sites the tie names in its order (the others where they were,
/// `order_named`): a cut detaches the unit's programs in it (the
/// lowering lists what reads state before what keeps it).
pub(super) fn merge_ties(units: Vec<Unit>, ties: &[Vec<SiteRef>]) -> Vec<Unit> {
    let mut index = Index::default();
    for (i, u) in units.iter().enumerate() {
        for s in &u.sites {
            index.put(s, i);
        }
    }
    let mut units: Vec<Option<Unit>> = units.into_iter().map(Some).collect();
    for tie in ties {
        let mut covered = BTreeSet::new();
        for t in tie {
            index.covered_by(t, &mut covered);
        }
        if covered.is_empty() {
            continue;
        }
        let merged = units.len();
        let mut sites = Vec::new();
        for i in covered {
            for s in units[i].take().map(|u| u.sites).unwrap_or_default() {
                index.forget(&s, i);
                sites.push(s);
            }
        }
        order_named(&mut sites, &places(tie));
        for s in &sites {
            index.put(s, merged);
        }
        units.push(Some(Unit { sites, attached: true }));
    }
    units.into_iter().flatten().collect()
}

/// Puts the sites that a tie names (those `place` finds) in the tie's order, in the
/// places those sites held; the others keep theirs. So an earlier tie's order among
/// sites this tie does not name is kept (a stable merge): a tie of an entry and its
/// pops added to a unit that already has its pops after other entries leaves them so.
fn order_named(sites: &mut [SiteRef], place: &dyn Fn(&SiteRef) -> Option<usize>) {
    let slots: Vec<usize> = (0..sites.len()).filter(|&k| place(&sites[k]).is_some()).collect();
    let mut named: Vec<SiteRef> = slots.iter().map(|&k| sites[k].clone()).collect();
    named.sort_by_key(|s| place(s));
    for (k, s) in slots.into_iter().zip(named) {
        sites[k] = s;
    }
}

/// A site's first place in `tie`: the first entry of its program that names its
/// function, names no function, or (for a whole program's site) any entry of it.
fn places(tie: &[SiteRef]) -> impl Fn(&SiteRef) -> Option<usize> + '_ {
    let mut exact: HashMap<(&str, Option<&str>), usize> = HashMap::new();
    let mut program: HashMap<&str, usize> = HashMap::new();
    for (i, t) in tie.iter().enumerate() {
        exact.entry((t.program.as_str(), t.function.as_deref())).or_insert(i);
        program.entry(t.program.as_str()).or_insert(i);
    }
    move |s: &SiteRef| match &s.function {
        None => program.get(s.program.as_str()).copied(),
        Some(f) => {
            let own = exact.get(&(s.program.as_str(), Some(f.as_str()))).copied();
            let whole = exact.get(&(s.program.as_str(), None)).copied();
            own.into_iter().chain(whole).min()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(program: &str, function: Option<&str>) -> SiteRef {
        SiteRef { program: program.into(), function: function.map(str::to_string) }
    }

    /// The plain definition: tie by tie, partition the units into those holding a site
    /// the tie names and the rest; the tied ones become one unit at the end.
    fn merge_by_scanning(mut units: Vec<Unit>, ties: &[Vec<SiteRef>]) -> Vec<Unit> {
        let names = |t: &SiteRef, s: &SiteRef| {
            t.program == s.program && (t.function.is_none() || s.function.is_none() || t.function == s.function)
        };
        for tie in ties {
            let covers = |u: &Unit| u.sites.iter().any(|s| tie.iter().any(|t| names(t, s)));
            let (tied, mut rest): (Vec<Unit>, Vec<Unit>) = units.drain(..).partition(covers);
            if !tied.is_empty() {
                let place = |s: &SiteRef| tie.iter().position(|t| names(t, s));
                let sites: Vec<SiteRef> = tied.into_iter().flat_map(|u| u.sites).collect();
                // Named sites sorted by place, each into the next slot a named site held.
                let mut named: Vec<&SiteRef> = sites.iter().filter(|s| place(s).is_some()).collect();
                named.sort_by_key(|s| place(s));
                let mut named = named.into_iter().cloned();
                let sites = (sites.iter())
                    .map(|s| if place(s).is_some() { named.next().unwrap() } else { s.clone() })
                    .collect();
                rest.push(Unit { sites, attached: true });
            }
            units = rest;
        }
        units
    }

    #[test]
    fn merging_by_index_is_merging_by_scanning() {
        // Programs p0..p5, each attached at some of f0..f7 or whole; ties drawn from a
        // fixed sequence so that they overlap, chain and name whole programs.
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for _ in 0..200 {
            let mut units = Vec::new();
            for p in 0..6 {
                let program = format!("p{p}");
                if next(3) == 0 {
                    units.push(Unit { sites: vec![site(&program, None)], attached: true });
                } else {
                    for f in 0..8 {
                        if next(2) == 0 {
                            let s = site(&program, Some(&format!("f{f}")));
                            units.push(Unit { sites: vec![s], attached: true });
                        }
                    }
                }
            }
            let ties: Vec<Vec<SiteRef>> = (0..next(6))
                .map(|_| {
                    (0..1 + next(4))
                        .map(|_| {
                            let f = (next(4) > 0).then(|| format!("f{}", next(8)));
                            site(&format!("p{}", next(6)), f.as_deref())
                        })
                        .collect()
                })
                .collect();
            let fast: Vec<Vec<SiteRef>> = merge_ties(units.clone(), &ties).into_iter().map(|u| u.sites).collect();
            let slow: Vec<Vec<SiteRef>> = merge_by_scanning(units, &ties).into_iter().map(|u| u.sites).collect();
            assert_eq!(fast, slow, "ties {ties:?}");
        }
    }

    #[test]
    fn a_later_tie_keeps_the_order_of_sites_it_does_not_name() {
        // Two trace-context functions, their pops one whole program: the second tie
        // names only the pops, which must stay after the first function's entry.
        let units = vec![
            Unit { sites: vec![site("entry", Some("f1"))], attached: true },
            Unit { sites: vec![site("entry", Some("f2"))], attached: true },
            Unit { sites: vec![site("pops", None)], attached: true },
        ];
        let ties = vec![
            vec![site("entry", Some("f1")), site("pops", Some("f1"))],
            vec![site("entry", Some("f2")), site("pops", Some("f2"))],
        ];
        let merged = merge_ties(units, &ties);
        assert_eq!(merged.len(), 1);
        let programs: Vec<&str> = merged[0].sites.iter().map(|s| s.program.as_str()).collect();
        assert_eq!(programs, ["entry", "entry", "pops"], "{:?}", merged[0].sites);
    }

    #[test]
    fn ten_thousand_return_probes_tie_at_once() {
        // `on return "main.*"` over 10,000 functions: each return tied to its entry's
        // timing. Each tie is found by lookups (0.37 s for all 10,000 in a debug build,
        // where scanning every unit per tie took 2.2 s per 1,000 ties).
        let functions: Vec<String> = (0..10_000).map(|i| format!("main.f{i}")).collect();
        let mut units = Vec::new();
        let mut ties = Vec::new();
        for f in &functions {
            units.push(Unit { sites: vec![site("ret", Some(f))], attached: true });
            units.push(Unit { sites: vec![site("timing", Some(f))], attached: true });
            ties.push(vec![site("ret", Some(f)), site("timing", Some(f))]);
        }
        let merged = merge_ties(units, &ties);
        assert_eq!(merged.len(), 10_000);
        assert!(merged.iter().all(|u| u.sites.len() == 2 && u.sites[0].program == "ret"));
    }
}
