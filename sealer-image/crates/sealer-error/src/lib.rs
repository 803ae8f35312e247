//! The sealer's one error type: every command (PC1, PC2, C1, snap, parent cache) fails with a
//! [`SealerError`], whose class is the process exit code the operator acts on. The table of
//! codes is shared with the operator (`contracts/exit-codes.json`); a test holds both to it.

#![warn(missing_docs)]

/// Every sealer command's error, grouped by what the operator should do about it: each class
/// exits with its code from the operator's table.
#[derive(Debug, thiserror::Error)]
pub enum SealerError {
    /// Bad input (config, layout vs this machine). Fix the input.
    #[error("invalid input: {0}")]
    Input(String),
    /// The CPU lacks what the hot path needs (SHA-NI).
    #[error("unsupported machine: {0}")]
    Unsupported(String),
    /// Storage or file-system failure.
    #[error("storage error: {0}")]
    Io(String),
    /// The node's parent cache is missing, unverified or corrupt: rebuild it, then retry.
    #[error("parent cache: {0}")]
    ParentCache(String),
    /// A data sector's staged file or comm_d disagrees with its pieces: fix the data or the
    /// piece list; the same input fails again.
    #[error("data mismatch: {0}")]
    DataMismatch(String),
    /// PC2's GPU engine has no usable OpenCL device, or its device failed (lost, out of
    /// memory): the message names the device. Never a silent fall back to the CPU.
    #[error("GPU engine: {0}")]
    Device(String),
    /// `verify-pc1` found stored labels that do not match their parents (the layers are
    /// damaged, PC1 must run again), or every sealed sector failed its audit before handoff.
    #[error("verification failed: {0}")]
    VerifyMismatch(String),
    /// Another thread failed first (internal; never returned from a command).
    #[error("aborted")]
    Aborted,
    /// A bug or unexpected state.
    #[error("internal error: {0}")]
    Internal(String),
}

impl SealerError {
    /// What went wrong, without the class's prefix.
    pub fn message(&self) -> &str {
        match self {
            SealerError::Input(m)
            | SealerError::Unsupported(m)
            | SealerError::Io(m)
            | SealerError::ParentCache(m)
            | SealerError::DataMismatch(m)
            | SealerError::Device(m)
            | SealerError::VerifyMismatch(m)
            | SealerError::Internal(m) => m,
            SealerError::Aborted => "aborted",
        }
    }

    /// Process exit code for this error class: 2 input, 3 I/O, 4 unsupported CPU, 5 labels
    /// that do not match their parents, 6 parent cache missing or corrupt, 7 data that does
    /// not match its pieces, 8 the GPU engine's device missing or failed, 1 internal.
    pub fn exit_code(&self) -> i32 {
        match self {
            SealerError::Input(_) => 2,
            SealerError::Io(_) => 3,
            SealerError::Unsupported(_) => 4,
            SealerError::ParentCache(_) => 6,
            SealerError::DataMismatch(_) => 7,
            SealerError::Device(_) => 8,
            SealerError::VerifyMismatch(_) => 5,
            SealerError::Aborted | SealerError::Internal(_) => 1,
        }
    }

    /// The name of [`SealerError::exit_code`]'s entry in the exit-code table the operator reads
    /// (`contracts/exit-codes.json`; a test checks both).
    pub fn exit_name(&self) -> &'static str {
        match self {
            SealerError::Input(_) => "input",
            SealerError::Io(_) => "io",
            SealerError::Unsupported(_) => "unsupported",
            SealerError::ParentCache(_) => "parent-cache",
            SealerError::DataMismatch(_) => "data-mismatch",
            SealerError::Device(_) => "device",
            SealerError::VerifyMismatch(_) => "verify-mismatch",
            SealerError::Aborted | SealerError::Internal(_) => "internal",
        }
    }
}

impl From<sealer_config::ConfigError> for SealerError {
    fn from(e: sealer_config::ConfigError) -> Self {
        SealerError::Input(e.to_string())
    }
}

impl SealerError {
    /// A storage error: what was being done, and what failed.
    pub fn io(what: &str, e: impl std::fmt::Display) -> Self {
        SealerError::Io(format!("{what}: {e}"))
    }
}

#[cfg(test)]
mod exit_code_contract {
    use super::SealerError;

    /// Every error's exit code is the code the operator's table gives its name, and every code
    /// the table lists for an error class is one some error exits with.
    #[test]
    fn exit_codes_are_the_operators_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../contracts/exit-codes.json");
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let table: Vec<(i64, String)> = doc["codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["code"].as_i64().unwrap(), c["name"].as_str().unwrap().to_string()))
            .collect();
        let errors = [
            SealerError::Input(String::new()),
            SealerError::Io(String::new()),
            SealerError::Unsupported(String::new()),
            SealerError::ParentCache(String::new()),
            SealerError::DataMismatch(String::new()),
            SealerError::Device(String::new()),
            SealerError::VerifyMismatch(String::new()),
            SealerError::Internal(String::new()),
            SealerError::Aborted,
        ];
        for e in &errors {
            let want = (e.exit_code() as i64, e.exit_name().to_string());
            assert!(table.contains(&want), "{e:?} exits {} as {}, which {} lacks", want.0, want.1, path.display());
        }
        // The table's one code that is no error: success.
        for (code, name) in &table {
            let from_errors = errors.iter().any(|e| e.exit_code() as i64 == *code);
            assert!(
                from_errors || (*code, name.as_str()) == (0, "success"),
                "{} lists exit {code} ({name}), which no sealer error exits with",
                path.display()
            );
        }
    }
}
