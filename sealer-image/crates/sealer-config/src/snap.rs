//! The config of a SnapDeals update (`sealer snap`): sealed CC sectors and the deal data to
//! encode into each.

use crate::values::{self, Hex32, Named, U64};
use crate::{err, parse_data, ConfigError, RawData, RegisteredProof, SectorData};
use serde::Deserialize;
use std::path::PathBuf;

/// One sector to update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapSectorSpec {
    /// Sector number.
    pub sector_id: u64,
    /// The sealed CC replica (read only).
    pub sector_key: PathBuf,
    /// Its cache directory with `p_aux` and `t_aux` (read only).
    pub sector_key_cache: PathBuf,
    /// The deal data: staged file and pieces.
    pub data: SectorData,
    /// comm_d of the data, if given (must equal the pieces').
    pub comm_d: Option<[u8; 32]>,
    /// The sector key's comm_r the update expects, if given (its p_aux must make it).
    pub comm_r_old: Option<[u8; 32]>,
}

/// A validated update config.
#[derive(Clone, Debug)]
pub struct SnapConfig {
    /// The sealed sectors' proof (their size and graph).
    pub proof: RegisteredProof,
    /// The sectors.
    pub sectors: Vec<SnapSectorSpec>,
    /// Each update goes to `<output_dir>/<sector_id>/{sealed,cache/}`, results to `results.json`.
    pub output_dir: PathBuf,
    /// Where the updated replica's tree-r-last is built (`pc2_engine`, default cpu).
    pub pc2_engine: crate::Pc2Engine,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSnap {
    registered_proof: Option<String>,
    sectors: Option<Vec<RawSnapSector>>,
    output_dir: Option<String>,
    pc2_engine: Option<Named<crate::Pc2Engine>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSnapSector {
    sector_id: Option<U64>,
    sector_key: Option<String>,
    sector_key_cache: Option<String>,
    data: Option<RawData>,
    comm_d: Option<Hex32>,
    comm_r_old: Option<Hex32>,
}

fn abs(field: &str, v: Option<String>) -> Result<PathBuf, ConfigError> {
    match v {
        Some(p) if p.starts_with('/') => Ok(PathBuf::from(p)),
        _ => err(field, "give an absolute path"),
    }
}

impl SnapConfig {
    /// Parse and validate (no I/O); every error names its field.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let raw: RawSnap = values::from_json(text)?;
        let name = raw.registered_proof.unwrap_or_default();
        let Some(proof) = RegisteredProof::parse(&name) else {
            return err("registered_proof", format!("{name:?} is not a seal proof name (e.g. StackedDrg32GiBV1_1)"));
        };
        let raw_sectors = match raw.sectors {
            Some(s) if !s.is_empty() => s,
            _ => return err("sectors", "give at least one sector to update"),
        };
        let mut sectors = Vec::with_capacity(raw_sectors.len());
        for (i, rs) in raw_sectors.into_iter().enumerate() {
            let f = |k: &str| format!("sectors[{i}].{k}");
            let Some(U64(sector_id)) = rs.sector_id else {
                return err(f("sector_id"), "missing; give the sector number");
            };
            if sectors.iter().any(|s: &SnapSectorSpec| s.sector_id == sector_id) {
                return err(f("sector_id"), format!("sector {sector_id} is listed twice"));
            }
            let data = match rs.data {
                Some(d) => parse_data(&f("data"), d, proof.sector_size)?,
                None => return err(f("data"), "missing; give the staged file and its pieces"),
            };
            let comm_d = rs.comm_d.map(|Hex32(d)| d);
            sectors.push(SnapSectorSpec {
                sector_id,
                sector_key: abs(&f("sector_key"), rs.sector_key)?,
                sector_key_cache: abs(&f("sector_key_cache"), rs.sector_key_cache)?,
                data,
                comm_d,
                comm_r_old: rs.comm_r_old.map(|Hex32(r)| r),
            });
        }
        let pc2_engine = raw.pc2_engine.map_or(crate::Pc2Engine::Cpu, |Named(e)| e);
        Ok(SnapConfig { proof, sectors, output_dir: abs("output_dir", raw.output_dir)?, pc2_engine })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> serde_json::Value {
        serde_json::json!({
            "registered_proof": "StackedDrg2KiBV1_1", "output_dir": "/out",
            "sectors": [{"sector_id": 5, "sector_key": "/in/sealed", "sector_key_cache": "/in/cache",
                "data": {"path": "/deals/s-5", "pieces": [{"comm_p": "0c".repeat(32), "size": 2048}]}}]
        })
    }

    /// The operator's golden update config (internal/render/testdata in the Go module) is the
    /// contract: it parses, and it carries every key `sealer snap` reads.
    #[test]
    fn operator_golden_snap_config_is_the_contract() {
        use crate::tests::read_keys;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../internal/render/testdata/snap-config.golden.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let c = SnapConfig::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!((c.proof.sector_size, c.sectors.len()), (32 << 30, 2));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let missing = |keys: Vec<&'static str>, obj: &serde_json::Value| -> Vec<&'static str> {
            keys.into_iter().filter(|k| obj.get(*k).is_none()).collect()
        };
        assert_eq!(missing(read_keys::<RawSnap>(), &v), Vec::<&str>::new(), "config keys never rendered");
        let with_comm_d = v["sectors"].as_array().unwrap().iter().find(|s| s.get("comm_d").is_some()).unwrap();
        assert_eq!(
            missing(read_keys::<RawSnapSector>(), with_comm_d),
            Vec::<&str>::new(),
            "sector keys never rendered"
        );
        assert!(read_keys::<RawSnapSector>().len() == 6, "the probe must see the struct's fields");
    }

    #[test]
    fn every_field_is_checked_and_named() {
        let c = SnapConfig::from_json(&base().to_string()).unwrap();
        assert_eq!((c.proof.sector_size, c.sectors[0].sector_id, c.sectors[0].data.pieces.len()), (2048, 5, 1));
        for (edit, field) in [
            (("registered_proof", serde_json::json!("StackedDrg3KiB")), "registered_proof"),
            (("output_dir", serde_json::json!("out")), "output_dir"),
            (("sectors", serde_json::json!([])), "sectors"),
        ] {
            let mut v = base();
            v[edit.0] = edit.1;
            assert_eq!(SnapConfig::from_json(&v.to_string()).unwrap_err().field, field);
        }
        let mut v = base();
        v["sectors"][0]["sector_key"] = "sealed".into();
        assert_eq!(SnapConfig::from_json(&v.to_string()).unwrap_err().field, "sectors[0].sector_key");
        let mut v = base();
        v["sectors"][0]["data"]["pieces"][0]["size"] = 4096.into();
        assert_eq!(SnapConfig::from_json(&v.to_string()).unwrap_err().field, "sectors[0].data.pieces[0].size");
        let mut v = base();
        let s = v["sectors"][0].clone();
        v["sectors"] = serde_json::json!([s.clone(), s]);
        assert_eq!(SnapConfig::from_json(&v.to_string()).unwrap_err().field, "sectors[1].sector_id");
    }
}
