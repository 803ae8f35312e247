//! The `sealer` command line (clap derive): the subcommands, the arguments they share
//! (declared once, flattened where used), and the parsers of typed values. A value clap refuses
//! exits 2, the exit-code table's "bad input".

use clap::{Args, Parser, Subcommand};
use sealer_config::RegisteredProof;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "sealer", version, about = "sealfleet native batch sealer (PC1, PC2 on the CPU or an OpenCL device)")]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// `--config`: the batch config every batch command reads.
#[derive(Args)]
pub struct ConfigArg {
    /// Batch config (JSON).
    #[arg(long)]
    pub config: PathBuf,
}

/// `--termination-log`: where a command that reports results also writes them.
#[derive(Args)]
pub struct TerminationLog {
    /// Also write the summary here (Kubernetes termination message; env SEALER_TERMINATION_LOG).
    #[arg(long, env = "SEALER_TERMINATION_LOG")]
    pub termination_log: Option<PathBuf>,
}

/// How PC1 runs on this machine (`pc1`, `batch`).
#[derive(Args)]
pub struct Pc1Flags {
    /// Accept the slow portable SHA-256 kernel when the CPU lacks SHA-NI.
    #[arg(long)]
    pub allow_portable_hash: bool,
    /// Do not pin threads to the layout's CPUs.
    #[arg(long)]
    pub no_pin: bool,
    /// No progress bar on the terminal.
    #[arg(long)]
    pub quiet: bool,
}

/// PC1's memory for parents (`pc1`, `plan`).
#[derive(Args)]
pub struct Pc1Memory {
    /// Node-cache budget in MiB.
    #[arg(long, default_value_t = 1024)]
    pub cache_mib: u64,
    /// Memory in MiB for the resident part of the previous layer (read sequentially at each
    /// layer's start; expander parents in it need no random read). 0: the config's share.
    #[arg(long, default_value_t = 0)]
    pub resident_mib: u64,
}

/// `--no-layer-files` (`pc2`, `batch`, `plan`).
#[derive(Args)]
pub struct LayerFiles {
    /// Do not copy the layer files into each cache dir (rust-fil-proofs C1 needs them).
    #[arg(long)]
    pub no_layer_files: bool,
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Label every layer of every sector of the batch (resumes after the last finished layer).
    Pc1 {
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        flags: Pc1Flags,
        #[command(flatten)]
        memory: Pc1Memory,
        /// Ignore saved progress and start again from layer 1.
        #[arg(long)]
        restart: bool,
    },
    /// PC2 for a batch whose PC1 is complete: tree-c, tree-r-last, replica, p_aux/t_aux, results.json.
    Pc2 {
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        layer_files: LayerFiles,
        #[command(flatten)]
        term: TerminationLog,
    },
    /// PC1 then PC2 (both resumable).
    Batch {
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        flags: Pc1Flags,
        #[command(flatten)]
        layer_files: LayerFiles,
        #[command(flatten)]
        term: TerminationLog,
    },
    /// Recompute K random labels from their parents as stored and compare (exit 5 on a mismatch).
    VerifyPc1 {
        #[command(flatten)]
        config: ConfigArg,
        /// Number of (layer, node) samples; each checks every sector.
        #[arg(long, default_value_t = 1000)]
        nodes: usize,
        /// RNG seed (default: time based).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Write each sector's layers as rust-fil-proofs files DIR/<sector_id>/sc-02-data-layer-<n>.dat.
    LayerExport {
        #[command(flatten)]
        config: ConfigArg,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// Build (or check) a graph's parent cache in a node's cache directory: keep it when its
    /// file matches its manifest's digest, else build it with storage-proofs-porep and record
    /// the digest. Sealer pods given that directory (`parent_cache_dir`) only read it.
    ParentCache {
        /// The registered proof whose graph it is, e.g. StackedDrg32GiBV1_1.
        #[arg(long, value_parser = parse_proof)]
        proof: RegisteredProof,
        /// The node's cache directory.
        #[arg(long)]
        dir: PathBuf,
    },
    /// Print what this binary and machine can run, as JSON: the PC2 engines (`gpu` only when an
    /// OpenCL device opens: the first GPU, or `SEALER_GPU_DEVICE`'s index) and every OpenCL
    /// device. The node agent publishes it in the node's SealerNode (the operator's source of
    /// truth for which engines a node's sealer image runs there).
    Capabilities {
        /// Also write the document to this file (atomically; the node agent reads it).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Check a batch config against this machine without sealing (layout on the CPUs granted,
    /// parent cache, layer devices and sizes, hugepages, output space, data files) and print
    /// what the batch needs: slot, buffers, hugepages, parent cache, outputs, PC1 time and IOPS
    /// at a labelling rate. Exit 0 when ready, 2 when a check fails.
    Plan {
        #[command(flatten)]
        config: ConfigArg,
        /// Labels per second per hasher thread to estimate PC1 time and IOPS with (measured by
        /// `sealer bench pc1`; about 1.0 M with SHA-NI on the 2-core EPYC in the README).
        #[arg(long, default_value_t = 1.0e6, value_parser = parse_rate)]
        rate: f64,
        #[command(flatten)]
        memory: Pc1Memory,
        #[command(flatten)]
        layer_files: LayerFiles,
        /// A `sealer qualify` document (its --out file) with the layer devices' sequential
        /// read and write bandwidths: PC2's reads and writes bounds come from them.
        #[arg(long)]
        qualification: Option<PathBuf>,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Print the CPU layout the sealer would use on this machine (calculator JSON).
    Calc {
        /// Batch size (power of two, 1..=128).
        #[arg(long, default_value_t = 32, value_parser = parse_batch_size)]
        batch_size: usize,
        /// Take the batch size (and layout, if any) from this config instead.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Stage raw piece files into one data sector's file, as lotus does before sealing (each
    /// piece zero-padded to 127·2^k bytes, fr32-padded and aligned by filecoin-proofs'
    /// add_piece, the rest of the sector zero), and print the sector's `data` for a batch
    /// config: {path, pieces: [{comm_p, size}]} plus the sector's comm_d.
    Stage {
        /// Sector size: 2KiB, 8MiB, 512MiB, 32GiB or 64GiB (or its bytes).
        #[arg(long, value_parser = sealer_config::parse_sector_size)]
        sector_size: u64,
        /// A raw piece file (repeat, in order).
        #[arg(long = "piece", required = true)]
        pieces: Vec<PathBuf>,
        /// The staged sector file to write.
        #[arg(long)]
        out: PathBuf,
        /// Print instead the sector's `data` for a SealBatch (one line of JSON, which YAML
        /// reads too): {file: this path, relative to the batch's dataSource, pieces: [{cid,
        /// size}]}.
        #[arg(long, value_name = "FILE")]
        sealbatch_file: Option<String>,
    },
    /// SnapDeals: encode deal data into sealed CC sectors (filecoin-proofs' encode_into, every
    /// sector of the config at once). Writes `<output_dir>/<sector_id>/{sealed,cache/}` and
    /// `results.json` with comm_d_new, comm_r_old, comm_r_last_new and comm_r_new.
    Snap {
        /// Update config (JSON): registered_proof, output_dir, sectors[] {sector_id,
        /// sector_key, sector_key_cache, data {path, pieces}, comm_d?}.
        #[arg(long)]
        config: PathBuf,
        #[command(flatten)]
        term: TerminationLog,
    },
    /// C1 once the seeds are known: each seeded sector's `commit-phase1-output` in its cache
    /// directory. V1_1: from the labels in the slot, after PC2 (no layer files kept).
    /// SyntheticPoRep: from the sector's stored synthetic proofs (no slot needed). The batch's
    /// results.json (PC2) gives comm_r and comm_d.
    C1 {
        #[command(flatten)]
        config: ConfigArg,
        /// Seeds (JSON): {"sectors": [{"sector_id": N, "seed": "<64 hex>"}]}.
        #[arg(long)]
        seeds: PathBuf,
        #[command(flatten)]
        term: TerminationLog,
    },
    /// SnapDeals with crates.io filecoin-proofs (`encode_into`, one sector at a time) on an
    /// update config: prints the results in `sealer snap`'s format, the reference the e2e
    /// compares sealfleet's updates with. Test sector sizes only.
    OracleSnap {
        /// Update config (JSON), as for `sealer snap`; its output_dir is not used.
        #[arg(long)]
        config: PathBuf,
        /// Work directory for the updated replicas.
        #[arg(long, default_value = "/var/tmp/sealer-oracle-snap")]
        work: PathBuf,
    },
    /// Seal the config's sectors with crates.io filecoin-proofs (PC1 + PC2, one at a time) and
    /// print their commitments in the results.json format: the reference the demo and the
    /// e2e tests compare sealfleet's results with. Test sector sizes (2KiB, 8MiB, 512MiB) only.
    Oracle {
        #[command(flatten)]
        config: ConfigArg,
        /// Work directory for the rust-fil-proofs parent cache and the sector files.
        #[arg(long, default_value = "/var/tmp/sealer-oracle")]
        work: PathBuf,
    },
    /// Measure this node without destroying data: each layer device's sequential write bandwidth
    /// only inside --write-range, then its 4 KiB random-read IOPS and sequential read bandwidth
    /// (inside that range, else anywhere), the SHA hashing rate, 1 GiB hugepages, memory
    /// bandwidth; prints JSON
    Qualify {
        #[command(flatten)]
        args: QualifyArgs,
        #[command(flatten)]
        term: TerminationLog,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
}

/// What `sealer qualify` measures and for how long.
#[derive(Args)]
pub struct QualifyArgs {
    /// A layer device: block device or regular file (repeat; none: only CPU, memory and
    /// hugepages). Written only inside --write-range, where a layer file is created or grown to
    /// the range's end; never truncated, never created without a range.
    #[arg(long = "device", value_name = "PATH")]
    pub devices: Vec<PathBuf>,
    /// Bytes OFFSET:LENGTH of every device where the write measurement may write (a free
    /// slot; both multiples of 4096). Without it no device is written.
    #[arg(long, value_name = "OFFSET:LENGTH", value_parser = parse_write_range)]
    pub write_range: Option<sealer_qualify::WriteRange>,
    /// Why there is no write measurement, reported as each device's write_skipped.
    #[arg(long, value_name = "TEXT", default_value = "no write range given", conflicts_with = "write_range")]
    pub no_write_reason: String,
    /// Seconds per measurement (each device's random reads, sequential reads and writes, the
    /// hashing, the memory copy).
    #[arg(long, default_value_t = 2.0, value_parser = parse_seconds)]
    pub seconds: f64,
    /// 4 KiB random reads in flight.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub depth: u32,
    /// 1 GiB hugepages to map and fault (at most the free ones; 0: only count the free).
    #[arg(long, default_value_t = 1)]
    pub hugepages_probe: usize,
    /// Threads of the memory copy (default: the CPUs this process may use, at most 8).
    #[arg(long, value_parser = parse_threads)]
    pub threads: Option<usize>,
    /// Also write the document to this file (atomically).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum BenchCmd {
    /// PC2: filecoin-proofs seal_pre_commit_phase2 vs sealer PC2, seconds per sector.
    Pc2 {
        /// Sector size: 2KiB, 8MiB or 512MiB.
        #[arg(long, default_value = "8MiB", value_parser = parse_test_sector_size)]
        sector_size: u64,
        /// Sectors in the sealer batch (power of two, 1..=128).
        #[arg(long, default_value_t = 4, value_parser = parse_batch_size)]
        batch: usize,
        /// Work directory.
        #[arg(long, default_value = "/dev/shm/sealer-bench")]
        dir: PathBuf,
        /// `gpu` adds the GPU engine (OpenCL device `SEALER_GPU_DEVICE`, else the first GPU)
        /// beside the CPU engine.
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "gpu"])]
        engine: String,
        /// Leave the CPU engine's PC2 out (needs `--engine gpu`; filecoin-proofs' one sector still runs).
        #[arg(long)]
        skip_cpu: bool,
        /// Random labels in the slot instead of PC1, and no filecoin-proofs sector (PC2's work
        /// does not depend on label values): times PC2 where PC1 would take too long.
        #[arg(long)]
        random_layers: bool,
        /// Hashes per arity when measuring each engine's Poseidon rates (the 32 GiB prediction).
        #[arg(long, default_value_t = 1 << 16)]
        rate_hashes: usize,
    },
    /// PC2's data path against fio on the same files: a slot laid out as PC1 lays it out (random
    /// labels) read as PC2 reads it, the outputs written as PC2 writes them, fio's sequential
    /// read and write beside them; GB/s, CPU-seconds per GB and the ratios, and a JSON document.
    Pc2Io {
        /// Sector size (any Filecoin size: the slot is sectors × size × layers bytes).
        #[arg(long, default_value = "8MiB", value_parser = parse_sector_size_arg)]
        sector_size: u64,
        /// Sectors in the batch (power of two, 1..=128).
        #[arg(long, default_value_t = 8, value_parser = parse_batch_size)]
        batch: usize,
        /// Layer files the slot stripes over (one ring and reader thread each).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        layer_files: u32,
        /// The slot's start in each layer file, MiB.
        #[arg(long, default_value_t = 0)]
        slot_offset_mib: u64,
        /// Request caps to read with, KiB, comma-separated (multiples of 4, at least 256).
        #[arg(long, value_delimiter = ',', default_value = "256,1024,4096", value_parser = parse_request_kib)]
        request_kib: Vec<usize>,
        /// Work directory: the layer files and the outputs (tmpfs measures the sealer; a disk
        /// measures the disk).
        #[arg(long, default_value = "/dev/shm/sealer-bench")]
        dir: PathBuf,
        /// Also run PC2 itself on the slot on this engine, for its read waits beside hashing
        /// (`none` skips it: at 512 MiB × 8 the CPU engine takes most of an hour on 2 CPUs).
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "gpu", "none"])]
        hashing: String,
        /// Times every row runs (the sealer's and fio's in turn); each row keeps its best.
        #[arg(long, default_value_t = 2)]
        rounds: usize,
        /// Where to write the JSON document (default: <dir>/pc2-io.json).
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// `bench pc2 --engine gpu`'s peer, in the child process it starts: filecoin-proofs' own GPU
    /// path (neptune through rust-gpu-tools) on the bench's first sector, and neptune's GPU
    /// batcher rates; one JSON line. Needs a binary built with the fil-gpu feature.
    #[command(hide = true)]
    FilGpuPeer {
        /// As `bench pc2`.
        #[arg(long, value_parser = parse_test_sector_size)]
        sector_size: u64,
        /// As `bench pc2`.
        #[arg(long, value_parser = parse_batch_size)]
        batch: usize,
        /// As `bench pc2`.
        #[arg(long)]
        dir: PathBuf,
        /// As `bench pc2`.
        #[arg(long, default_value_t = 1 << 16)]
        rate_hashes: usize,
        /// The rates alone, no sector (`bench pc2 --random-layers`).
        #[arg(long)]
        rates_only: bool,
    },
    /// How fast host memory reaches OpenCL device `SEALER_GPU_DEVICE` (else the first GPU):
    /// page-locked memory from its base and from inside it, the page-locked buffer object
    /// copied by the device, ordinary memory; on one queue and on two. One JSON document.
    GpuCopies {
        /// MiB copied along each path.
        #[arg(long, default_value_t = 4096)]
        mib: usize,
    },
    /// The GPU engine's Poseidon kernels alone (arity 2, 8, 11) on OpenCL device
    /// `SEALER_GPU_DEVICE` (else the first GPU): hashes/s, the share of the device's integer
    /// multiply peak, and the Poseidon seconds of a 32 GiB sector; one JSON document.
    GpuKernels {
        /// Hashes per kernel run.
        #[arg(long, default_value_t = 1 << 20)]
        groups: usize,
        /// Timed runs per arity (after one warm-up).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Kernel variants to measure, comma-separated: default, portable, baseline (the
        /// kernels before mont.cl, for the ratio).
        #[arg(long, value_delimiter = ',', default_value = "default,portable,baseline", value_parser = parse_kernels)]
        variants: Vec<sealer_gpu::Kernels>,
        /// Write each variant's program binaries (PTX on NVIDIA) into this folder, for the
        /// vendor's profiling tools.
        #[arg(long)]
        binaries: Option<std::path::PathBuf>,
        /// Work-group sizes to also time the default kernels in, comma-separated (none: skip).
        #[arg(long, value_delimiter = ',')]
        local_sizes: Vec<usize>,
        /// Register caps to also time the default kernels under at arities 8 and 11,
        /// comma-separated (NVIDIA's `-cl-nv-maxrregcount`; elsewhere each is reported as not
        /// measured).
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(16..=255))]
        max_registers: Vec<u32>,
    },
    /// PC2 of a 32 GiB sector's shape on the GPU engine without a slot: one of its 8 base
    /// trees (2^27 leaves, 11 layers) from generated labels, through the batch pipeline, checked
    /// by sampling against neptune; seconds per 32 GiB sector, the stage table, device memory.
    Pc2Shape {
        /// log2 of the base tree's leaves (a multiple of 3; 27 for 32 GiB).
        #[arg(long, default_value_t = 27)]
        leaves_log2: u32,
        /// Layers (11 for 32 and 64 GiB sectors).
        #[arg(long, default_value_t = 11)]
        layers: usize,
        /// Nodes checked per level of each tree.
        #[arg(long, default_value_t = 4096)]
        samples: u64,
        /// log2 of the range (default: what the devices and host buffers hold).
        #[arg(long)]
        range_log2: Option<u32>,
        /// The label generator's key.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// SyntheticPoRep proofs: filecoin-proofs generate_synth_proofs vs the sealer's streaming
    /// writer (time, CPU, peak RSS, equal files), and the prediction for 128 × 32 GiB.
    Synth {
        /// Sector size: 2KiB, 8MiB or 512MiB.
        #[arg(long, default_value = "8MiB", value_parser = parse_test_sector_size)]
        sector_size: u64,
        /// Sectors in the batch (power of two, 1..=128).
        #[arg(long, default_value_t = 4, value_parser = parse_batch_size)]
        batch: usize,
        /// Sectors filecoin-proofs proves (0 skips it: at 512 MiB it needs ~24 GB).
        #[arg(long, default_value_t = 1)]
        baseline_sectors: usize,
        /// Work directory.
        #[arg(long, default_value = "/dev/shm/sealer-bench")]
        dir: PathBuf,
    },
    /// SHA bound vs rust-fil-proofs PC1 vs sealer PC1 on N = 1, 8, 32.
    Pc1 {
        /// Sector size: 2KiB, 8MiB (quick) or 512MiB.
        #[arg(long, default_value = "512MiB", value_parser = parse_test_sector_size)]
        sector_size: u64,
        /// Batch sizes, comma-separated (powers of two, 1..=128).
        #[arg(long, default_value = "1,8,32", value_delimiter = ',', value_parser = parse_batch_size)]
        batches: Vec<usize>,
        /// Directory for layer files (tmpfs measures the engine; a disk measures I/O).
        #[arg(long, default_value = "/dev/shm/sealer-bench")]
        dir: PathBuf,
        /// Skip the rust-fil-proofs baseline.
        #[arg(long)]
        skip_baseline: bool,
        /// Seconds per SHA-bound measurement.
        #[arg(long, default_value_t = 2.0)]
        sha_seconds: f64,
        /// Node-cache budgets of the sealer runs in MiB, one run each (a budget of 2 layers
        /// keeps the previous layer in memory), e.g. 1024,2200.
        #[arg(long, default_value = "1024", value_delimiter = ',')]
        cache_mib: Vec<u64>,
        /// Also run every N with its buffers on up to this many 1 GiB hugepages (free in the
        /// node's pool), for a row on ordinary pages and one on hugepages.
        #[arg(long, default_value_t = 0)]
        hugepages: usize,
        /// Percentages of the previous layer held resident, one run each (e.g. 0,50,100); used
        /// when --cache-mib cannot keep the whole previous layer.
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(0..=100))]
        resident: Vec<u64>,
        /// Label only the first K layers of each batch (0: all), for large batches whose
        /// every layer would not fit the time or the disk; rates are per layer anyway.
        #[arg(long, default_value_t = 0)]
        layers: usize,
    },
}

/// A batch size: a power of two from 1 to [`sealer_config::MAX_BATCH`].
fn parse_kernels(s: &str) -> Result<sealer_gpu::Kernels, String> {
    sealer_gpu::Kernels::parse(s)
        .ok_or_else(|| format!("{s:?} is not a kernel variant: give default, portable or baseline"))
}

fn parse_batch_size(s: &str) -> Result<usize, String> {
    let max = sealer_config::MAX_BATCH;
    s.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| n.is_power_of_two() && *n <= max)
        .ok_or_else(|| format!("{s:?} is not a batch size: a power of two from 1 to {max}"))
}

/// A sector size the benchmarks seal with the oracle beside: 2KiB, 8MiB or 512MiB.
fn parse_test_sector_size(s: &str) -> Result<u64, String> {
    sealer_config::parse_sector_size(s)
        .ok()
        .filter(|b| *b <= 512 << 20)
        .ok_or_else(|| format!("{s:?}: the benchmarks take 2KiB, 8MiB or 512MiB"))
}

/// A read request cap in KiB: whole pages, at least 256 KiB (smaller requests are what PC2
/// moved away from).
fn parse_request_kib(s: &str) -> Result<usize, String> {
    let min = sealer_storage::MIN_REQUEST_BYTES >> 10;
    s.trim()
        .parse::<usize>()
        .ok()
        .filter(|k| *k >= min && k.is_multiple_of(4))
        .ok_or_else(|| format!("{s:?} KiB: give a multiple of 4 KiB of at least {min} KiB"))
}

/// Any Filecoin sector size, e.g. 512MiB or 32GiB.
fn parse_sector_size_arg(s: &str) -> Result<u64, String> {
    sealer_config::parse_sector_size(s).map_err(|e| format!("{s:?}: {e}"))
}

/// A registered proof name, e.g. StackedDrg32GiBV1_1.
fn parse_proof(s: &str) -> Result<RegisteredProof, String> {
    RegisteredProof::parse(s).ok_or_else(|| format!("{s:?} is not a registered proof name (e.g. StackedDrg32GiBV1_1)"))
}

/// A positive number of labels per second.
fn parse_rate(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && *r > 0.0)
        .ok_or_else(|| format!("{s:?}: the rate is a positive number of labels per second"))
}

/// A write range, OFFSET:LENGTH in bytes (see [`sealer_qualify::WriteRange`]).
fn parse_write_range(s: &str) -> Result<sealer_qualify::WriteRange, String> {
    s.parse()
}

/// A positive, finite number of seconds.
fn parse_seconds(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| format!("{s:?}: the duration is a positive number of seconds"))
}

/// A number of threads, at least 1.
fn parse_threads(s: &str) -> Result<usize, String> {
    s.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| format!("{s:?}: the thread count is a whole number >= 1"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn typed_values_are_refused_with_the_fix() {
        let err = |args: &[&str]| Cli::try_parse_from(args).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err(&["sealer", "calc", "--batch-size", "3"]).contains("power of two from 1 to 128"));
        assert!(err(&["sealer", "bench", "pc1", "--batches", "1,x"]).contains("\"x\" is not a batch size"));
        assert!(err(&["sealer", "bench", "pc2", "--sector-size", "32GiB"]).contains("2KiB, 8MiB or 512MiB"));
        assert!(err(&["sealer", "stage", "--sector-size", "1GiB", "--piece", "p", "--out", "o"]).contains("one of"));
        assert!(err(&["sealer", "parent-cache", "--proof", "Nope", "--dir", "d"]).contains("registered proof"));
        assert!(err(&["sealer", "plan", "--config", "c", "--rate", "0"]).contains("positive number"));
        assert!(err(&["sealer", "bench", "pc1", "--resident", "0,150"]).contains("150"));
        assert!(err(&["sealer", "qualify", "--write-range", "1:4096"]).contains("--write-range"));
        assert!(err(&["sealer", "qualify", "--seconds", "0"]).contains("positive number of seconds"));
        assert!(err(&["sealer", "qualify", "--depth", "0"]).contains("--depth"));
        assert!(err(&["sealer", "qualify", "--threads", "0"]).contains(">= 1"));
        let both = ["sealer", "qualify", "--write-range", "0:4096", "--no-write-reason", "full"];
        assert!(err(&both).contains("cannot be used with"));
    }

    #[test]
    fn comma_lists_parse_into_values() {
        let cli =
            Cli::try_parse_from(["sealer", "bench", "pc1", "--batches", "1,8", "--cache-mib", "1024,2200"]).unwrap();
        let Cmd::Bench { what: BenchCmd::Pc1 { batches, cache_mib, resident, sector_size, .. } } = cli.cmd else {
            panic!("not bench pc1")
        };
        assert_eq!((batches, cache_mib, resident, sector_size), (vec![1, 8], vec![1024, 2200], vec![], 512 << 20));
    }
}
