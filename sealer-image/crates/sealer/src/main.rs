//! `sealer`: native batch sealer for sealfleet.
//!
//! Exit codes: the table in `contracts/exit-codes.json` (0 success, 1 internal error, 2 invalid
//! input, 3 storage / I/O failure, 4 no SHA-NI, 5 verify-pc1 mismatches, 6 parent cache missing
//! or corrupt, 7 data that is not its pieces, 8 the GPU engine's device missing or failed): the
//! class of the [`sealer_error::SealerError`] a command returns. The command line is `cli`, what
//! each command does is `run`.

mod cli;
mod run;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Everything that logs, filecoin-proofs and storage-proofs included, goes through the `log`
    // facade to stderr; RUST_LOG sets the level (default info).
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    match run::run(cli::Cli::parse().cmd) {
        Ok(()) => {
            // Tests: a power loss right after exit 0 (with lost writes, every output must be
            // synced by now).
            sealer_storage::durable::crash_point("sealer.exit");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sealer: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
