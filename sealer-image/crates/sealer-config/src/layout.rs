//! CPU layout: which logical CPU runs which sealer thread.

use crate::{err, ConfigError};
use serde::{Deserialize, Serialize};

/// One hasher thread: its CPU and how many sectors it hashes (2 per thread is the
/// multi-buffer sweet spot; 1 works).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hasher {
    /// Logical CPU id.
    pub cpu: usize,
    /// Sectors this thread hashes.
    pub sectors: usize,
}

/// A coordinator (one per L3 group) and the hashers it feeds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Coordinator {
    /// Logical CPU id of the coordinator thread.
    pub cpu: usize,
    /// Its hasher threads.
    pub hashers: Vec<Hasher>,
}

/// Batch-wide threads, each on its own logical CPU in the operator's layouts. PC1 runs the
/// writer, reader and orchestrator; the PC2 and C1 CPUs are part of the layout the operator
/// decides (so the node agent and the pod's cpuset account for them) and are checked here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Roles {
    /// CPU of the layer writer thread.
    pub writer: usize,
    /// CPU of the parent reader thread.
    pub reader: usize,
    /// CPU of the orchestrator (progress, layer sequencing).
    pub orchestrator: usize,
    /// CPU of the PC2 column reader.
    pub pc2_reader: usize,
    /// CPU driving the Poseidon hashing (a GPU when present).
    pub pc2_hasher: usize,
    /// CPU finishing tree levels on the CPU.
    pub pc2_hasher_cpu: usize,
    /// CPU of the tree-file writer.
    pub pc2_writer: usize,
    /// CPU of the C1 challenge reader.
    pub c1_reader: usize,
}

impl Roles {
    /// Every role with its name, in declaration order.
    pub fn named(&self) -> [(&'static str, usize); 8] {
        [
            ("writer", self.writer),
            ("reader", self.reader),
            ("orchestrator", self.orchestrator),
            ("pc2_reader", self.pc2_reader),
            ("pc2_hasher", self.pc2_hasher),
            ("pc2_hasher_cpu", self.pc2_hasher_cpu),
            ("pc2_writer", self.pc2_writer),
            ("c1_reader", self.c1_reader),
        ]
    }
}

/// The layout as the operator's calculator (`internal/layout` in the Go module, `node-agent
/// calc`) writes it; the operator decides it once at placement and the sealer runs it as
/// given. Unknown keys are rejected: a key the sealer would ignore is a contract break.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    /// Sectors in the batch.
    pub batch_size: usize,
    /// Whether this machine can run the batch size.
    pub supported: bool,
    /// Why the batch size is unsupported (only when `supported` is false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Coordinators with their hashers.
    pub coordinators: Vec<Coordinator>,
    /// Batch-wide threads.
    pub roles: Roles,
    /// Hasher threads per physical core the layout uses.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hashers_per_core: usize,
    /// NUMA nodes of the layout's CPUs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub numa_nodes: Vec<usize>,
    /// A shared-core layout (every thread on one core; development machines only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Layout {
    /// Check the layout against the batch size.
    pub fn validate(&self, n: usize) -> Result<(), ConfigError> {
        if !self.supported {
            return err("layout.supported", "the calculator marked this batch size unsupported on this node; choose a smaller batch or another node");
        }
        if self.batch_size != n {
            return err(
                "layout.batch_size",
                format!(
                    "{} does not match the {n} sectors listed; recompute the layout for batch size {n}",
                    self.batch_size
                ),
            );
        }
        if self.coordinators.is_empty() {
            return err("layout.coordinators", "empty; give at least one coordinator with hashers");
        }
        let mut total = 0;
        for (i, c) in self.coordinators.iter().enumerate() {
            if c.hashers.is_empty() {
                return err(
                    format!("layout.coordinators[{i}].hashers"),
                    "empty; each coordinator needs at least one hasher",
                );
            }
            for (j, h) in c.hashers.iter().enumerate() {
                if h.sectors == 0 {
                    return err(format!("layout.coordinators[{i}].hashers[{j}].sectors"), "must be at least 1");
                }
                total += h.sectors;
            }
        }
        if total != n {
            return err("layout.coordinators", format!("hashers cover {total} sectors but the batch has {n}; the `sectors` of all hashers must add up to the batch size"));
        }
        Ok(())
    }

    /// The standalone layout for `n` sectors on this machine, from `/sys` and the affinity mask
    /// (see [`Layout::standalone`]).
    pub fn default_for(n: usize) -> Layout {
        Self::standalone(n, &l3_groups())
    }

    /// Layout for `n` sectors given L3 groups (lists of logical CPUs sharing an L3), for a
    /// sealer run by hand (a config without a layout, `sealer calc`, the benchmarks).
    ///
    /// Not a layout calculator: the operator's (`internal/layout`, Go) is the one owner of the
    /// core-role arithmetic. It decides every placed batch's layout, which the config carries
    /// and the sealer only checks and fits to the CPUs it was granted ([`Layout::fit_to`]:
    /// CPUs move, roles never). This is the simplest layout that runs. Rules: every batch-wide role
    /// shares the first CPU of the first group; each group
    /// gets a coordinator on its first CPU; hashers go on the group's other CPUs (on groups of
    /// one or two CPUs they also use the coordinator's CPU, and the coordinator then does not
    /// run). Sectors are dealt to hashers in pairs, as evenly as possible.
    pub fn standalone(n: usize, groups: &[Vec<usize>]) -> Layout {
        let groups: Vec<Vec<usize>> = groups.iter().filter(|g| !g.is_empty()).cloned().collect();
        let groups = if groups.is_empty() { vec![vec![0]] } else { groups };
        let roles_cpu = groups[0][0];
        let total_cpus: usize = groups.iter().map(|g| g.len()).sum();
        // Hasher CPUs per group.
        let mut slots: Vec<(usize, usize)> = Vec::new(); // (group, cpu)
        for (gi, g) in groups.iter().enumerate() {
            let mut cpus: Vec<usize> = if g.len() <= 2 { g.clone() } else { g[1..].to_vec() };
            if gi == 0 && total_cpus > 4 && cpus.len() > 1 {
                // keep the roles CPU free of hashers on bigger machines
                cpus.retain(|&c| c != roles_cpu);
            }
            for c in cpus {
                slots.push((gi, c));
            }
        }
        let units = n.div_ceil(2); // sector pairs
        let threads = slots.len().min(units).max(1);
        // distribute pairs to threads, order by group so coordinators stay local
        let mut per_thread = vec![0usize; threads];
        let mut remaining = n;
        let mut t = 0;
        while remaining > 0 {
            let take = remaining.min(2);
            per_thread[t % threads] += take;
            remaining -= take;
            t += 1;
        }
        let mut coords: Vec<Coordinator> = Vec::new();
        for (ti, (gi, cpu)) in slots.iter().take(threads).enumerate() {
            let gcpu = groups[*gi][0];
            if coords.last().map(|c| c.cpu) != Some(gcpu) {
                coords.push(Coordinator { cpu: gcpu, hashers: vec![] });
            }
            coords.last_mut().unwrap().hashers.push(Hasher { cpu: *cpu, sectors: per_thread[ti] });
        }
        Layout {
            batch_size: n,
            supported: n.is_power_of_two() && n <= crate::MAX_BATCH,
            coordinators: coords,
            reason: None,
            roles: Roles {
                writer: roles_cpu,
                reader: roles_cpu,
                orchestrator: roles_cpu,
                pc2_reader: roles_cpu,
                pc2_hasher: roles_cpu,
                pc2_hasher_cpu: roles_cpu,
                pc2_writer: roles_cpu,
                c1_reader: roles_cpu,
            },
            hashers_per_core: 0,
            numa_nodes: vec![],
            shared: false,
        }
    }
}

/// Parse a kernel CPU list like `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                out.extend(a..=b);
            }
        } else if let Ok(a) = part.trim().parse() {
            out.push(a);
        }
    }
    out
}

pub(crate) fn format_cpu_list(c: &[usize]) -> String {
    c.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

/// CPUs this process may run on (from `/proc/self/status` `Cpus_allowed_list`, else all
/// online CPUs).
pub fn allowed_cpus() -> Vec<usize> {
    if let Ok(s) = std::fs::read_to_string("/proc/self/status") {
        for line in s.lines() {
            if let Some(rest) = line.strip_prefix("Cpus_allowed_list:") {
                let v = parse_cpu_list(rest);
                if !v.is_empty() {
                    return v;
                }
            }
        }
    }
    if let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/online") {
        let v = parse_cpu_list(&s);
        if !v.is_empty() {
            return v;
        }
    }
    vec![0]
}

/// Allowed CPUs grouped by shared L3 (`cache/index3/shared_cpu_list`); CPUs without that file
/// form one group.
pub fn l3_groups() -> Vec<Vec<usize>> {
    let allowed = allowed_cpus();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut loose = Vec::new();
    for &c in &allowed {
        if seen.contains(&c) {
            continue;
        }
        let p = format!("/sys/devices/system/cpu/cpu{c}/cache/index3/shared_cpu_list");
        match std::fs::read_to_string(&p) {
            Ok(s) => {
                let g: Vec<usize> = parse_cpu_list(&s).into_iter().filter(|x| allowed.contains(x)).collect();
                for x in &g {
                    seen.insert(*x);
                }
                if !g.is_empty() {
                    groups.push(g);
                }
            }
            Err(_) => {
                seen.insert(c);
                loose.push(c);
            }
        }
    }
    if !loose.is_empty() {
        groups.push(loose);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_list() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
    }

    #[test]
    fn compute_layouts_are_valid() {
        for n in [1, 2, 4, 8, 32, 128] {
            for groups in [vec![vec![0, 1]], vec![(0..8).collect(), (8..16).collect()], vec![vec![0]]] {
                let l = Layout::standalone(n, &groups);
                l.validate(n).unwrap();
                let all: Vec<usize> = groups.concat();
                let (_, fit) = l.fit_to(&all, &crate::CpuTopology::default()).unwrap();
                assert!(fit.moved.is_empty());
            }
        }
        let l = Layout::standalone(8, &[vec![0, 1]]);
        assert_eq!(l.coordinators.len(), 1);
        assert_eq!(l.coordinators[0].hashers.len(), 2);
        assert_eq!(l.coordinators[0].hashers[0].sectors, 4);
    }

    /// Every supported layout in the Go calculator's golden files (internal/layout/testdata)
    /// parses, validates and round-trips: the layout half of the operator contract.
    #[test]
    fn go_calculator_golden_layouts_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../internal/layout/testdata");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let all: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            for v in all.into_iter().filter(|v| v["supported"] == true) {
                let l: Layout =
                    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{}: {e}\n{v}", path.display()));
                l.validate(l.batch_size).unwrap();
                assert_eq!(serde_json::to_value(&l).unwrap(), v, "{} round trip", path.display());
                checked += 1;
            }
        }
        assert!(checked > 20, "only {checked} golden layouts found in {}", dir.display());
    }
}
