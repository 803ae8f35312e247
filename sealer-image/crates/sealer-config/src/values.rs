//! The typed values of the config JSON: each parses itself and says what is wrong in the
//! words the operator's users see. serde_path_to_error adds where (`sectors[1].ticket`), and
//! [`from_json`] turns both into a [`ConfigError`].

use crate::ConfigError;
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// Parse `text` as `T`, every error naming the field it is about and how to fix it.
pub(crate) fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let msg = inner.to_string();
        // serde_json appends where in the text; the field path says it better.
        let msg = msg.rsplit_once(" at line ").map_or(msg.clone(), |(m, _)| m.to_string());
        if inner.is_syntax() || inner.is_eof() || path == "." {
            return ConfigError { field: "<document>".into(), message: format!("not a valid JSON object: {msg}") };
        }
        ConfigError { field: path, message: msg }
    })
}

/// A non-negative integer, given as a number or as a decimal string (large ids arrive as
/// strings from JSON producers that fear precision loss).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct U64(pub u64);

impl<'de> Deserialize<'de> for U64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = U64;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a non-negative integer")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<U64, E> {
                Ok(U64(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<U64, E> {
                u64::try_from(v).map(U64).map_err(|_| E::custom(format!("must be a non-negative integer, got {v}")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<U64, E> {
                Err(E::custom(format!("must be a non-negative integer, got {v}")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<U64, E> {
                v.parse().map(U64).map_err(|_| E::custom(format!("must be a non-negative integer, got {v:?}")))
            }
        }
        d.deserialize_any(V)
    }
}

/// 32 bytes given as 64 hex characters (an optional `0x` prefix is accepted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hex32(pub [u8; 32]);

impl Hex32 {
    /// Parse the text form; the error says what to give.
    pub(crate) fn parse(s: &str) -> Result<[u8; 32], String> {
        let s = s.strip_prefix("0x").unwrap_or(s);
        let bytes = hex::decode(s).map_err(|e| format!("must be 64 hex characters (32 bytes): {e}"))?;
        <[u8; 32]>::try_from(bytes.as_slice())
            .map_err(|_| format!("must be 32 bytes (64 hex characters), got {} bytes", bytes.len()))
    }
}

impl<'de> Deserialize<'de> for Hex32 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Hex32::parse(&s).map(Hex32).map_err(de::Error::custom)
    }
}

/// A value given by its name in the config (`"1.1.0"`, `"SyntheticPoRep"`, `"gpu"`, a
/// registered proof, an IP address).
pub(crate) trait FromName: Sized {
    /// The value of `name`, or what names there are.
    fn from_name(name: &str) -> Result<Self, String>;
}

/// A [`FromName`] value as the config gives it: a string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Named<T>(pub T);

impl<'de, T: FromName> Deserialize<'de> for Named<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        T::from_name(&s).map(Named).map_err(de::Error::custom)
    }
}

impl FromName for crate::ApiVersion {
    fn from_name(s: &str) -> Result<Self, String> {
        crate::ApiVersion::parse(s).ok_or_else(|| format!("unknown `{s}`; use \"1.0.0\", \"1.1.0\" or \"1.2.0\""))
    }
}

impl FromName for crate::Feature {
    fn from_name(s: &str) -> Result<Self, String> {
        match s {
            "SyntheticPoRep" => Ok(crate::Feature::SyntheticPoRep),
            "NonInteractivePoRep" => Ok(crate::Feature::NonInteractivePoRep),
            _ => Err(format!("unknown feature `{s}`; use \"SyntheticPoRep\" or \"NonInteractivePoRep\"")),
        }
    }
}

impl FromName for crate::RegisteredProof {
    fn from_name(s: &str) -> Result<Self, String> {
        crate::RegisteredProof::parse(s).ok_or_else(|| {
            format!(
                "unknown proof `{s}`; use e.g. StackedDrg32GiBV1_1, StackedDrg2KiBV1, \
                 StackedDrg8MiBV1_1_Feat_SyntheticPoRep, StackedDrg64GiBV1_2_Feat_NonInteractivePoRep"
            )
        })
    }
}

impl FromName for crate::Pc2Engine {
    fn from_name(s: &str) -> Result<Self, String> {
        crate::Pc2Engine::parse(s).ok_or_else(|| format!("unknown engine `{s}`; use \"cpu\" or \"gpu\""))
    }
}

impl FromName for std::net::IpAddr {
    fn from_name(s: &str) -> Result<Self, String> {
        s.parse().map_err(|_| format!("{s:?} is not an IP address; use e.g. 127.0.0.1 or 0.0.0.0"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        n: Option<U64>,
        h: Option<Vec<Hex32>>,
        e: Option<Named<crate::Pc2Engine>>,
    }

    #[test]
    fn values_parse_and_errors_name_the_field() {
        let d: Doc = from_json(r#"{"n": "18446744073709551615", "h": ["0x00000000000000000000000000000000000000000000000000000000000000ff"], "e": "gpu"}"#).unwrap();
        assert_eq!(d.n, Some(U64(u64::MAX)));
        assert_eq!(d.h.unwrap()[0].0[31], 0xff);
        assert_eq!(d.e, Some(Named(crate::Pc2Engine::Gpu)));
        for (text, field, words) in [
            (r#"{"n": -1}"#, "n", "non-negative integer, got -1"),
            (r#"{"h": ["00", "abcd"]}"#, "h[0]", "32 bytes (64 hex characters), got 1 bytes"),
            (r#"{"e": "tpu"}"#, "e", "use \"cpu\" or \"gpu\""),
            (r#"{"x": 1}"#, "x", "unknown field `x`"),
            (r#"{"n": 1"#, "<document>", "EOF"),
        ] {
            let e = from_json::<Doc>(text).unwrap_err();
            assert_eq!(e.field, field, "{text}: {e}");
            assert!(e.message.contains(words) && !e.message.contains(" at line "), "{text}: {e}");
        }
    }
}
