//! Fitting the operator's layout onto the CPUs the container was actually granted.
//!
//! With the kubelet's CPU manager policy `none` the container may run anywhere and the layout's
//! CPUs are used as given. With `static` the kubelet picks the exclusive CPUs itself (packed by
//! L3 with `prefer-align-cpus-by-uncorecache`), so the layout's CPU ids may not be the granted
//! ones: the layout's *shape* (which threads share a core, which cores share an L3) is kept and
//! moved onto the granted CPUs.

use crate::layout::{format_cpu_list, parse_cpu_list};
use crate::{err, ConfigError, Layout};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Where one logical CPU sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CpuPlace {
    /// Key of its L3 group (lowest CPU sharing that L3; all CPUs without L3 data share one key).
    pub l3: usize,
    /// Key of its physical core (package and core id).
    pub core: (usize, usize),
}

/// The machine's CPU topology, as far as fitting needs it.
#[derive(Clone, Debug, Default)]
pub struct CpuTopology {
    places: BTreeMap<usize, CpuPlace>,
}

impl CpuTopology {
    /// Topology from explicit places (tests, other machines).
    pub fn from_places(places: impl IntoIterator<Item = (usize, CpuPlace)>) -> CpuTopology {
        CpuTopology { places: places.into_iter().collect() }
    }

    /// Topology of this machine from `/sys/devices/system/cpu` for the given CPUs.
    pub fn from_sysfs(cpus: &[usize]) -> CpuTopology {
        let read = |c: usize, f: &str| std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{c}/{f}")).ok();
        let num = |c: usize, f: &str| read(c, f).and_then(|s| s.trim().parse::<usize>().ok());
        CpuTopology::from_places(cpus.iter().map(|&c| {
            let l3 = read(c, "cache/index3/shared_cpu_list")
                .and_then(|s| parse_cpu_list(&s).into_iter().min())
                .unwrap_or(usize::MAX);
            let core = match (num(c, "topology/physical_package_id"), num(c, "topology/core_id")) {
                (Some(p), Some(id)) => (p, id),
                _ => (usize::MAX, c),
            };
            (c, CpuPlace { l3, core })
        }))
    }

    fn place(&self, c: usize) -> CpuPlace {
        // A CPU the topology does not know is its own core in an unknown L3.
        self.places.get(&c).copied().unwrap_or(CpuPlace { l3: usize::MAX, core: (usize::MAX, c) })
    }

    /// `cpus` grouped by L3, then by core: `[l3][core][thread]`, groups and cores in CPU order.
    fn tree(&self, cpus: &BTreeSet<usize>) -> Vec<Vec<Vec<usize>>> {
        let mut by: BTreeMap<usize, BTreeMap<(usize, usize), Vec<usize>>> = BTreeMap::new();
        for &c in cpus {
            let p = self.place(c);
            by.entry(p.l3).or_default().entry(p.core).or_default().push(c);
        }
        let mut groups: Vec<Vec<Vec<usize>>> = by
            .into_values()
            .map(|cores| {
                let mut v: Vec<Vec<usize>> = cores.into_values().collect();
                v.sort_by_key(|t| t[0]);
                v
            })
            .collect();
        groups.sort_by_key(|g| g[0][0]);
        groups
    }
}

/// How the layout was fitted: what the container was granted and what moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CpuFit {
    /// CPUs the container may run on (its affinity mask).
    pub granted: String,
    /// The CPUs the layout runs on, one cpulist per L3 group.
    pub l3_groups: Vec<String>,
    /// Layout CPU → granted CPU, for every CPU that moved (empty when the layout's CPUs were granted).
    pub moved: BTreeMap<usize, usize>,
}

impl CpuFit {
    /// One line for the log.
    pub fn describe(&self) -> String {
        let groups = self.l3_groups.join(" | ");
        if self.moved.is_empty() {
            format!("CPUs granted {}; layout runs as placed on L3 groups [{groups}]", self.granted)
        } else {
            let moved: Vec<String> = self.moved.iter().map(|(a, b)| format!("{a}->{b}")).collect();
            format!(
                "CPUs granted {} differ from the layout's (kubelet CPU manager `static`?); layout moved onto L3 groups [{groups}]: {}",
                self.granted,
                moved.join(",")
            )
        }
    }
}

impl Layout {
    /// Every logical CPU the layout names.
    pub fn cpus(&self) -> BTreeSet<usize> {
        let mut s: BTreeSet<usize> = self.roles.named().iter().map(|r| r.1).collect();
        for c in &self.coordinators {
            s.insert(c.cpu);
            s.extend(c.hashers.iter().map(|h| h.cpu));
        }
        s
    }

    fn map_cpus(&self, m: &BTreeMap<usize, usize>) -> Layout {
        let f = |c: usize| m.get(&c).copied().unwrap_or(c);
        let mut l = self.clone();
        for c in &mut l.coordinators {
            c.cpu = f(c.cpu);
            for h in &mut c.hashers {
                h.cpu = f(h.cpu);
            }
        }
        let r = &mut l.roles;
        for c in [
            &mut r.writer,
            &mut r.reader,
            &mut r.orchestrator,
            &mut r.pc2_reader,
            &mut r.pc2_hasher,
            &mut r.pc2_hasher_cpu,
            &mut r.pc2_writer,
            &mut r.c1_reader,
        ] {
            *c = f(*c);
        }
        l
    }

    /// The layout moved onto `granted` CPUs, keeping its shape: threads that share a CPU still
    /// do, CPUs of one core stay on one core and cores of one L3 group stay in one group where
    /// the grant allows (largest groups first, each into the granted group it fits best). A
    /// layout whose CPUs were all granted is returned unchanged. Fails when the grant has
    /// fewer CPUs than the layout uses.
    pub fn fit_to(&self, granted: &[usize], topo: &CpuTopology) -> Result<(Layout, CpuFit), ConfigError> {
        let used = self.cpus();
        let granted: BTreeSet<usize> = granted.iter().copied().collect();
        let mut moved = BTreeMap::new();
        if !used.is_subset(&granted) {
            if granted.len() < used.len() {
                return err(
                    "layout",
                    format!(
                        "the layout uses {} CPUs ({}) but this container was granted {} ({}); the pod must request as many whole CPUs as the layout uses",
                        used.len(),
                        format_cpu_list(&used.iter().copied().collect::<Vec<_>>()),
                        granted.len(),
                        format_cpu_list(&granted.iter().copied().collect::<Vec<_>>()),
                    ),
                );
            }
            moved = assign(&topo.tree(&used), topo.tree(&granted));
        }
        let fitted = self.map_cpus(&moved);
        moved.retain(|a, b| a != b);
        let l3_groups = topo
            .tree(&fitted.cpus())
            .iter()
            .map(|g| {
                let mut v: Vec<usize> = g.concat();
                v.sort_unstable();
                format_cpu_list(&v)
            })
            .collect();
        let fit = CpuFit { granted: format_cpu_list(&granted.into_iter().collect::<Vec<_>>()), l3_groups, moved };
        Ok((fitted, fit))
    }
}

/// Map every CPU of `src` (`[l3][core][thread]`) to a distinct CPU of `dst`, same shape first.
/// The caller guarantees `dst` has at least as many CPUs as `src`.
fn assign(src: &[Vec<Vec<usize>>], mut dst: Vec<Vec<Vec<usize>>>) -> BTreeMap<usize, usize> {
    let size = |g: &Vec<Vec<usize>>| g.iter().map(Vec::len).sum::<usize>();
    let mut order: Vec<&Vec<Vec<usize>>> = src.iter().collect();
    order.sort_by_key(|g| (std::cmp::Reverse(size(g)), g[0][0]));
    let mut m = BTreeMap::new();
    for g in order {
        let need = size(g);
        // The smallest granted group that holds the whole group, else the one with most room.
        let mut gi = pick_group(&dst, need);
        let mut cores: Vec<&Vec<usize>> = g.iter().collect();
        cores.sort_by_key(|c| (std::cmp::Reverse(c.len()), c[0]));
        for core in cores {
            let mut threads = core.iter();
            while threads.len() > 0 {
                if size(&dst[gi]) == 0 {
                    gi = pick_group(&dst, threads.len());
                }
                let want = threads.len();
                let grp = &mut dst[gi];
                // The smallest core with room for the rest of this core's threads, else the fullest.
                let ci = (0..grp.len())
                    .filter(|&i| grp[i].len() >= want)
                    .min_by_key(|&i| (grp[i].len(), grp[i].first().copied()))
                    .or_else(|| {
                        (0..grp.len()).max_by_key(|&i| (grp[i].len(), std::cmp::Reverse(grp[i].first().copied())))
                    })
                    .expect("a group with room has a core");
                let take = want.min(grp[ci].len());
                for t in grp[ci].drain(..take) {
                    m.insert(*threads.next().expect("counted"), t);
                }
                grp.retain(|c| !c.is_empty());
            }
        }
    }
    m
}

fn pick_group(dst: &[Vec<Vec<usize>>], need: usize) -> usize {
    let size = |g: &Vec<Vec<usize>>| g.iter().map(Vec::len).sum::<usize>();
    (0..dst.len())
        .filter(|&i| size(&dst[i]) >= need)
        .min_by_key(|&i| (size(&dst[i]), i))
        .or_else(|| {
            (0..dst.len()).filter(|&i| size(&dst[i]) > 0).max_by_key(|&i| (size(&dst[i]), std::cmp::Reverse(i)))
        })
        .expect("the grant has CPUs left")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Coordinator, Hasher, Roles};

    /// `l3s` groups of `cores` cores with `smt` threads; CPU ids Linux-style (thread t of core
    /// c is `c + t * total_cores`).
    fn topo(l3s: usize, cores: usize, smt: usize) -> CpuTopology {
        let total = l3s * cores;
        CpuTopology::from_places((0..total).flat_map(|core| {
            (0..smt).map(move |t| (core + t * total, CpuPlace { l3: (core / cores) * cores, core: (0, core) }))
        }))
    }

    fn layout(roles: usize, coords: &[(usize, &[usize])]) -> Layout {
        let coordinators: Vec<Coordinator> = coords
            .iter()
            .map(|(c, hs)| Coordinator {
                cpu: *c,
                hashers: hs.iter().map(|&h| Hasher { cpu: h, sectors: 2 }).collect(),
            })
            .collect();
        let n = coordinators.iter().map(|c| c.hashers.len() * 2).sum();
        Layout {
            batch_size: n,
            supported: true,
            reason: None,
            coordinators,
            roles: Roles {
                writer: roles,
                reader: roles,
                orchestrator: roles,
                pc2_reader: roles,
                pc2_hasher: roles,
                pc2_hasher_cpu: roles,
                pc2_writer: roles,
                c1_reader: roles,
            },
            hashers_per_core: 0,
            numa_nodes: vec![],
            shared: false,
        }
    }

    #[test]
    fn granted_layout_is_unchanged() {
        let t = topo(2, 4, 1);
        let l = layout(0, &[(1, &[2, 3])]);
        let (f, fit) = l.fit_to(&(0..8).collect::<Vec<_>>(), &t).unwrap();
        assert_eq!(f, l);
        assert!(fit.moved.is_empty());
        assert_eq!(fit.l3_groups, vec!["0,1,2,3"]);
        assert!(fit.describe().contains("as placed"), "{}", fit.describe());
    }

    #[test]
    fn groups_and_cores_keep_their_shape() {
        // 4 L3 groups of 4 cores, SMT 2 (CPUs 0-15 first threads, 16-31 siblings).
        let t = topo(4, 4, 2);
        // Layout on groups 0 and 1: roles on core 0 (CPU 0), coordinator on its sibling 16,
        // hashers on both threads of cores 1-3; second group coordinator 4 + hashers 5,21,6,22.
        let l = layout(0, &[(16, &[1, 17, 2, 18, 3, 19]), (4, &[5, 21, 6, 22])]);
        // The kubelet granted groups 2 and 3 (cores 8-15 and their siblings).
        let granted: Vec<usize> = (8..16).chain(24..32).collect();
        let (f, fit) = l.fit_to(&granted, &t).unwrap();
        f.validate(l.batch_size).unwrap();
        let place = |c: usize| t.place(c);
        // Same CPU sharing, same cores, same L3 grouping.
        let src = l.cpus().into_iter().collect::<Vec<_>>();
        for &a in &src {
            for &b in &src {
                let (ma, mb) = (fit.moved[&a], fit.moved[&b]);
                assert!(granted.contains(&ma));
                assert_eq!(a == b, ma == mb, "{a},{b}");
                assert_eq!(place(a).core == place(b).core, place(ma).core == place(mb).core, "core {a},{b}");
                assert_eq!(place(a).l3 == place(b).l3, place(ma).l3 == place(mb).l3, "l3 {a},{b}");
            }
        }
        assert_eq!(f.roles.writer, f.roles.c1_reader);
        assert_eq!(fit.l3_groups.len(), 2);
        assert!(fit.describe().contains("moved"), "{}", fit.describe());
    }

    #[test]
    fn too_few_cpus_names_both_lists() {
        let t = topo(1, 4, 1);
        let l = layout(0, &[(1, &[2, 3])]);
        let e = l.fit_to(&[1, 2], &t).unwrap_err();
        assert_eq!(e.field, "layout");
        assert!(e.message.contains("uses 4 CPUs (0,1,2,3)") && e.message.contains("granted 2 (1,2)"), "{}", e.message);
    }

    #[test]
    fn split_grant_spills_across_groups() {
        // A layout on one 4-CPU group granted two CPUs in each of two groups.
        let t = topo(2, 4, 1);
        let l = layout(0, &[(1, &[2, 3])]);
        let (f, fit) = l.fit_to(&[2, 3, 4, 5], &t).unwrap();
        assert_eq!(f.cpus().into_iter().collect::<Vec<_>>(), vec![2, 3, 4, 5]);
        assert_eq!(fit.l3_groups, vec!["2,3", "4,5"]);
    }

    #[test]
    fn random_grants_keep_sharing() {
        // Deterministic pseudo-random layouts and grants on odd topologies.
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut next = |m: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m as u64) as usize
        };
        for _ in 0..300 {
            let (l3s, cores, smt) = (1 + next(4), 1 + next(6), 1 + next(2));
            let t = topo(l3s, cores, smt);
            let all: Vec<usize> = t.places.keys().copied().collect();
            let pick = |k: usize, next: &mut dyn FnMut(usize) -> usize| -> Vec<usize> {
                let mut v = all.clone();
                for i in (1..v.len()).rev() {
                    v.swap(i, next(i + 1));
                }
                v.truncate(k);
                v
            };
            let k = 1 + next(all.len());
            let src = pick(k, &mut next);
            let coords = [(src[0], &src[..])];
            let l = layout(src[next(src.len())], &coords);
            let granted = pick(k + next(all.len() - k + 1), &mut next);
            let (f, fit) = l.fit_to(&granted, &t).unwrap();
            f.validate(l.batch_size).unwrap();
            assert!(f.cpus().iter().all(|c| granted.contains(c)));
            assert_eq!(f.cpus().len(), l.cpus().len(), "{l:?} -> {f:?}");
            assert_eq!(f.roles.writer == f.coordinators[0].cpu, l.roles.writer == l.coordinators[0].cpu);
            assert!(fit.moved.keys().all(|c| l.cpus().contains(c)));
        }
    }
}
